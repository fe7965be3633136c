//! Grading an experiment's answer (`crate::experiments`): the same judge, prompt and
//! parser as a recorded call's, asked once an item's turn is answered. The judge call is
//! traced like any other judge call; its cost is added to the evaluator's spending by the
//! transaction that settles the item ([`CHARGE_ANSWER`]), so it is counted once whatever
//! restarts do. A paused evaluator, or one whose budget is spent, gives no grade.

use tracing::warn;

use super::{Evaluators, MAX_ATTEMPTS, grading, worker};
use crate::{Result, llm::judge::JudgeCall};

/// Adds a judge call's cost (`$2`) to evaluator `$1`'s spending and count.
pub const CHARGE_ANSWER: &str =
    "UPDATE evaluators SET spent_nanocents = spent_nanocents + $2, judged = judged + 1 WHERE id = $1";

/// What grading one answer came to.
pub struct AnswerGrade {
    /// The name of the evaluator's scores.
    pub score_name: String,
    /// The grade, or why there is none.
    pub grade: std::result::Result<grading::Grade, String>,
    /// What the judge calls cost (nanocents).
    pub cost_nanocents: i64,
}

impl Evaluators {
    /// Has evaluator `id` grade an answer to `input`. An upstream failure is tried again,
    /// [`MAX_ATTEMPTS`] in all; 404 when the evaluator is gone.
    pub async fn grade_answer(&self, id: &str, input: &str, output: &str, metadata: &str) -> Result<AnswerGrade> {
        let evaluator =
            self.row(id).await?.ok_or_else(|| roost_proto::ApiError::not_found(format!("no evaluator {id}")))?;
        let mut answer =
            AnswerGrade { score_name: evaluator.score_name.clone(), grade: Err(String::new()), cost_nanocents: 0 };
        if !evaluator.judging() {
            answer.grade = Err(format!("the evaluator {} is paused or its budget is spent", evaluator.name));
            return Ok(answer);
        }
        let prompt = grading::render(&evaluator.prompt, input, output, metadata);
        let mut judged: Option<JudgeCall> = None;
        for attempt in 1..=MAX_ATTEMPTS {
            match self.models.judge(&evaluator.model, &prompt).await {
                Ok(call) => {
                    judged = Some(call);
                    break;
                }
                Err(err) => {
                    answer.grade = Err(err.message().to_owned());
                    if attempt < MAX_ATTEMPTS {
                        tokio::time::sleep(std::time::Duration::from_millis(200 * attempt as u64)).await;
                    }
                }
            }
        }
        let Some(judged) = judged else { return Ok(answer) };
        answer.cost_nanocents = judged.cost_nanocents;
        answer.grade = evaluator.parser().read(&judged.text);
        let span = worker::judge_span(&evaluator, ("", ""), &judged, &prompt);
        if let Err(err) = self.telemetry.export_traces(worker::judge_request(vec![span]), None).await {
            warn!(error = %err.message(), evaluator = %evaluator.id, "a judge call's span was not stored");
        }
        Ok(answer)
    }
}

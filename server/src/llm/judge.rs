//! Calls roost makes itself, for its evaluators' judges (docs/observing.md#llm-judges):
//! one non-streamed OpenAI chat completion to the operator's managed upstream, priced by
//! the price book. The caller charges it (an evaluator's budget, not an account) and
//! records its span.

use std::time::Instant;

use roost_proto::{ApiError, ErrorReason};
use serde_json::{Value, json};

use super::{ModelGateway, answer::Answer, openai, read_capped, upstream_failed};
use crate::time::now_ms;

/// Most tokens a judge may answer with: a grade, and a sentence or two of why.
pub const MAX_JUDGE_TOKENS: i64 = 512;

/// What a judge's call came to.
#[derive(Debug, Clone, Default)]
pub struct JudgeCall {
    /// The model that answered.
    pub model: String,
    /// Its answer's text.
    pub text: String,
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Completion tokens.
    pub output_tokens: i64,
    /// What it cost at the price book's price (nanocents).
    pub cost_nanocents: i64,
    /// When it started (Unix ms).
    pub started_ms: i64,
    /// How long it took.
    pub duration_ms: i64,
}

impl ModelGateway {
    /// 400 `unpriced_model` unless the price book prices `model`, and 503 unless there is a
    /// managed upstream to ask: an evaluator is refused when it could not judge.
    pub fn check_judge(&self, model: &str) -> Result<(), ApiError> {
        if self.inner.config.openai.is_none() {
            return Err(upstream_failed(
                "this roost has no managed model upstream for judges (the operator starts it with --model-upstream-url)",
            ));
        }
        if self.inner.prices.lookup(model).is_none() {
            return Err(ApiError::new(
                ErrorReason::UnpricedModel,
                format!("the price book does not price {model:?}, so its judge calls could not be metered"),
            ));
        }
        Ok(())
    }

    /// Asks `model` the `prompt` (as one user message, at temperature 0). An upstream that
    /// fails, times out or answers what is not a chat completion is an error; what a call
    /// that answered cost is always returned with it.
    pub async fn judge(&self, model: &str, prompt: &str) -> Result<JudgeCall, ApiError> {
        self.check_judge(model)?;
        let upstream = self.inner.config.openai.clone().ok_or_else(|| upstream_failed("no managed upstream"))?;
        let price = self.inner.prices.lookup(model).unwrap_or_default();
        let body = json!({
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": MAX_JUDGE_TOKENS,
            "temperature": 0,
        });
        let started = Instant::now();
        let started_ms = now_ms();
        let mut request =
            self.inner.client.post(format!("{}/chat/completions", upstream.base_url.trim_end_matches('/'))).json(&body);
        if let Some(key) = &upstream.api_key {
            request = request.bearer_auth(key);
        }
        let timeout = self.inner.config.upstream_timeout;
        let answer = tokio::time::timeout(timeout, request.send())
            .await
            .map_err(|_| upstream_failed("the judge's upstream did not answer in time"))?
            .map_err(|e| upstream_failed(format!("the judge's upstream could not be reached: {e}")))?;
        let status = answer.status();
        let bytes = tokio::time::timeout(timeout, read_capped(answer))
            .await
            .map_err(|_| upstream_failed("the judge's upstream did not finish its answer in time"))?
            .map_err(|e| upstream_failed(format!("reading the judge's answer: {e}")))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
            return Err(upstream_failed(format!("the judge's upstream answered {status}: {text}")));
        }
        let parsed: Value = serde_json::from_slice(&bytes)
            .map_err(|e| upstream_failed(format!("the judge's upstream answered what is not JSON: {e}")))?;
        let mut read = Answer::default();
        openai::read_answer(&parsed, &mut read);
        let usage = read.usage.unwrap_or_default();
        Ok(JudgeCall {
            model: read.model.unwrap_or_else(|| model.to_owned()),
            text: read.text,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cost_nanocents: price.cost(
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
            ),
            started_ms,
            duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        })
    }
}

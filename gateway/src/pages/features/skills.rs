//! `/dashboard/skills`: every route the skill file (`/skill.md`) documents and every MCP
//! tool, by section, with how often each was used (`GET /api/skills`).

use askama::Template;
use axum::{extract::State, response::Response};
use roost_proto::v1::GetSkillsRequest;

use crate::{
    Core,
    pages::{
        Failure, When, count,
        layout::{Chrome, PageCall},
    },
};

#[derive(Template)]
#[template(path = "skills.html")]
struct SkillsPage {
    chrome: Chrome,
    skills: Result<Skills, Failure>,
}

struct Skills {
    skill_file: String,
    warning: String,
    sections: Vec<Section>,
    total: String,
    used: String,
}

struct Section {
    title: String,
    anchor: String,
    skills: Vec<SkillRow>,
}

struct SkillRow {
    name: String,
    summary: String,
    calls: String,
    errors: String,
    any_errors: bool,
    last_used: When,
}

/// An HTML id for a section title (`Hosted agents` → `s-hosted-agents`).
fn anchor(title: &str) -> String {
    let slug: String =
        title.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    format!("s-{}", slug.trim_matches('-'))
}

pub(super) async fn page(State(core): State<Core>, page: PageCall) -> Response {
    let answer = page.load("GET /api/skills", core.features.get_skills(page.request(GetSkillsRequest {}))).await;
    let skills = answer.map_err(Failure::from).map(|s| {
        let used = s.skills.iter().filter(|k| k.calls > 0).count();
        let total = s.skills.len();
        let mut sections: Vec<Section> = Vec::new();
        for skill in s.skills {
            let row = SkillRow {
                calls: count(skill.calls),
                errors: count(skill.errors),
                any_errors: skill.errors > 0,
                last_used: When::timestamp(skill.last_used_at.as_ref()),
                name: skill.name,
                summary: crate::pages::inline_markdown(&skill.summary),
            };
            match sections.last_mut() {
                Some(last) if last.title == skill.section => last.skills.push(row),
                _ => sections.push(Section { anchor: anchor(&skill.section), title: skill.section, skills: vec![row] }),
            }
        }
        Skills {
            skill_file: if s.skill_file.is_empty() { "/skill.md".into() } else { s.skill_file },
            warning: s.warning,
            sections,
            total: count(total as i64),
            used: count(used as i64),
        }
    });
    page.render(&SkillsPage { chrome: page.chrome("Skills", "/dashboard/skills"), skills })
}

#[cfg(test)]
mod tests {
    #[test]
    fn section_anchors_are_ids() {
        assert_eq!(super::anchor("Hosted agents"), "s-hosted-agents");
        assert_eq!(super::anchor("MCP tools"), "s-mcp-tools");
    }
}

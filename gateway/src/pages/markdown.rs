//! An agent's reply as HTML: its markdown rendered on the server, safe to put in a page.
//!
//! A reply is whatever the model wrote, so it is untrusted. It is parsed as CommonMark
//! (with strikethrough and tables) and written out element by element from a fixed list;
//! nothing of the reply reaches the page except as escaped text or an attribute value
//! roost escaped:
//! - raw HTML in the reply (`<script>`, `<img onerror=…>`) is shown as the text it is;
//! - links keep their real target, but only `http:`, `https:` and `mailto:` ones become
//!   links (with `rel="noopener noreferrer nofollow"`, opening in a new tab); any other
//!   (`javascript:`, `data:`, a relative path) is shown as its text;
//! - images are not loaded (the page loads nothing from elsewhere): they become a link to
//!   the image, named by its alt text.
//!
//! The page's CSP (no inline script, nothing from elsewhere) stays as it is: this is the
//! second wall, not the only one.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// The HTML of `markdown`.
pub fn render(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() + markdown.len() / 2);
    // Whether the link being written is shown as a link (its end tag must match).
    let mut links: Vec<bool> = Vec::new();
    // Inside an image, its alt text is written as the link's text.
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    let mut table_head = false;
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => out.push_str("<p>"),
                Tag::Heading { level, .. } => {
                    out.push_str(&format!("<h{}>", heading(level)));
                }
                Tag::BlockQuote(_) => out.push_str("<blockquote>"),
                Tag::CodeBlock(kind) => {
                    out.push_str("<pre><code");
                    if let CodeBlockKind::Fenced(lang) = kind {
                        let lang = lang.split_whitespace().next().unwrap_or_default();
                        if !lang.is_empty() {
                            out.push_str(" class=\"language-");
                            escape_into(&mut out, lang);
                            out.push('"');
                        }
                    }
                    out.push('>');
                }
                Tag::List(Some(1)) => out.push_str("<ol>"),
                Tag::List(Some(start)) => out.push_str(&format!("<ol start=\"{start}\">")),
                Tag::List(None) => out.push_str("<ul>"),
                Tag::Item => out.push_str("<li>"),
                Tag::Emphasis => out.push_str("<em>"),
                Tag::Strong => out.push_str("<strong>"),
                Tag::Strikethrough => out.push_str("<del>"),
                Tag::Table(_) => out.push_str("<table>"),
                Tag::TableHead => {
                    table_head = true;
                    out.push_str("<thead><tr>");
                }
                Tag::TableRow => out.push_str("<tr>"),
                Tag::TableCell => out.push_str(if table_head { "<th>" } else { "<td>" }),
                Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                    let shown = safe_target(&dest_url);
                    if shown {
                        out.push_str("<a href=\"");
                        escape_into(&mut out, &dest_url);
                        out.push_str("\" rel=\"noopener noreferrer nofollow\" target=\"_blank\">");
                    }
                    links.push(shown);
                }
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => out.push_str("</p>\n"),
                TagEnd::Heading(level) => out.push_str(&format!("</h{}>\n", heading(level))),
                TagEnd::BlockQuote(_) => out.push_str("</blockquote>\n"),
                TagEnd::CodeBlock => out.push_str("</code></pre>\n"),
                TagEnd::List(true) => out.push_str("</ol>\n"),
                TagEnd::List(false) => out.push_str("</ul>\n"),
                TagEnd::Item => out.push_str("</li>\n"),
                TagEnd::Emphasis => out.push_str("</em>"),
                TagEnd::Strong => out.push_str("</strong>"),
                TagEnd::Strikethrough => out.push_str("</del>"),
                TagEnd::Table => out.push_str("</tbody></table>\n"),
                TagEnd::TableHead => {
                    table_head = false;
                    out.push_str("</tr></thead><tbody>");
                }
                TagEnd::TableRow => out.push_str("</tr>"),
                TagEnd::TableCell => out.push_str(if table_head { "</th>" } else { "</td>" }),
                TagEnd::Link | TagEnd::Image if links.pop().unwrap_or(false) => out.push_str("</a>"),
                _ => {}
            },
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => escape_into(&mut out, &text),
            Event::Code(code) => {
                out.push_str("<code>");
                escape_into(&mut out, &code);
                out.push_str("</code>");
            }
            Event::SoftBreak => out.push('\n'),
            Event::HardBreak => out.push_str("<br>\n"),
            Event::Rule => out.push_str("<hr>\n"),
            Event::TaskListMarker(done) => out.push_str(if done { "[x] " } else { "[ ] " }),
            _ => {}
        }
    }
    out
}

fn heading(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// Whether a link's target may be a link: an absolute `http:`, `https:` or `mailto:` URL.
fn safe_target(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    ["http://", "https://", "mailto:"].iter().any(|scheme| lower.starts_with(scheme))
        && !url.chars().any(|c| c.is_control())
}

/// Appends `text` with `& < > " '` escaped.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn markdown_renders() {
        assert_eq!(render("**bold** and *it*"), "<p><strong>bold</strong> and <em>it</em></p>\n");
        assert_eq!(render("- a\n- b"), "<ul><li>a</li>\n<li>b</li>\n</ul>\n");
        assert_eq!(render("3. c"), "<ol start=\"3\"><li>c</li>\n</ol>\n");
        assert_eq!(render("```rust\nfn x() {}\n```"), "<pre><code class=\"language-rust\">fn x() {}\n</code></pre>\n");
        assert_eq!(render("`a<b`"), "<p><code>a&lt;b</code></p>\n");
        assert_eq!(
            render("[docs](https://example.com/a?b=1&c=\"2\")"),
            "<p><a href=\"https://example.com/a?b=1&amp;c=&quot;2&quot;\" rel=\"noopener noreferrer nofollow\" \
             target=\"_blank\">docs</a></p>\n"
        );
    }

    #[test]
    fn nothing_of_the_reply_runs() {
        let html = render("<script>alert(1)</script>\n\nhi <img src=x onerror=alert(2)>");
        assert!(!html.contains("<script") && !html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        for link in ["[x](javascript:alert(1))", "[x](JaVaScRiPt:alert(1))", "[x](data:text/html,hi)", "[x](/logout)"] {
            assert_eq!(render(link), "<p>x</p>\n", "{link}");
        }
        assert_eq!(
            render("![a cat](https://example.com/cat.png)"),
            "<p><a href=\"https://example.com/cat.png\" rel=\"noopener noreferrer nofollow\" target=\"_blank\">a \
             cat</a></p>\n"
        );
        let fence = render("```\" onload=\"x\n```");
        assert!(
            !fence.contains("onload") && !fence.contains("\"\""),
            "a code block's language is its first word: {fence}"
        );
        assert!(render("```a\"b\nx\n```").contains("language-a&quot;b"));
    }
}

//! The front matter of a `SKILL.md`: the lines between a leading `---` and
//! the next `---`, read as the small subset of YAML skill files use
//! (`key: value`, quoted or not, and lists as `[a, b]` or `- item` lines).
//! Keys other than `name`, `description` and `tools` (or `allowed-tools`)
//! are left to whoever else reads the file.

#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Front {
    pub name: Option<String>,
    pub description: Option<String>,
    pub tools: Vec<String>,
}

/// Most tools a skill may list.
const MAX_TOOLS: usize = 64;

/// Why a front matter is refused, and its skill with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontMatterError {
    #[error("the front matter has no closing `---`")]
    Unclosed,
    #[error("more than {MAX_TOOLS} tools listed")]
    TooManyTools,
}

/// The front matter and the body after it. A file without front matter is
/// all body.
pub(super) fn split(text: &str) -> Result<(Front, &str), FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok((Front::default(), text));
    };
    let mut front = Front::default();
    let mut offset = 0;
    let mut list_key: Option<String> = None;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim_end() == "---" {
            return Ok((front, &rest[offset..]));
        }
        if let Some(item) = line.trim_start().strip_prefix("- ") {
            if list_key.as_deref().is_some_and(is_tools) {
                push_tool(&mut front.tools, item)?;
            }
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if key.starts_with([' ', '\t']) {
            continue;
        }
        let key = key.trim();
        let value = value.trim();
        list_key = value.is_empty().then(|| key.to_owned());
        match key {
            "name" => front.name = Some(scalar(value)),
            "description" => front.description = Some(scalar(value)),
            key if is_tools(key) => {
                if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                    for item in inner.split(',').filter(|i| !i.trim().is_empty()) {
                        push_tool(&mut front.tools, item)?;
                    }
                } else if !value.is_empty() {
                    // `allowed-tools: Read Grep` as some skill files write it.
                    for item in value.split([' ', ',']).filter(|i| !i.is_empty()) {
                        push_tool(&mut front.tools, item)?;
                    }
                }
            }
            _ => {}
        }
    }
    Err(FrontMatterError::Unclosed)
}

fn is_tools(key: &str) -> bool {
    matches!(key, "tools" | "allowed-tools" | "allowed_tools")
}

fn push_tool(tools: &mut Vec<String>, item: &str) -> Result<(), FrontMatterError> {
    if tools.len() >= MAX_TOOLS {
        return Err(FrontMatterError::TooManyTools);
    }
    tools.push(scalar(item.trim()));
    Ok(())
}

/// A value without its quotes.
fn scalar(value: &str) -> String {
    let value = value.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner.to_owned();
        }
    }
    value.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_lists_and_body_are_read() {
        let text = "---\nname: triage\ndescription: \"Sort new issues: bug or not\"\ntools:\n  - AgentGet\n  - 'ExecCommand'\nlicense: MIT\n---\n# Triage\nBody.\n";
        let (front, body) = split(text).expect("front matter");
        assert_eq!(front.name.as_deref(), Some("triage"));
        assert_eq!(
            front.description.as_deref(),
            Some("Sort new issues: bug or not")
        );
        assert_eq!(front.tools, ["AgentGet", "ExecCommand"]);
        assert_eq!(body, "# Triage\nBody.\n");
    }

    #[test]
    fn flow_lists_and_space_lists_are_read() {
        let (front, _) = split("---\ntools: [A, \"B\"]\n---\n").expect("front");
        assert_eq!(front.tools, ["A", "B"]);
        let (front, _) = split("---\nallowed-tools: Read Grep\n---\n").expect("front");
        assert_eq!(front.tools, ["Read", "Grep"]);
    }

    #[test]
    fn no_front_matter_is_all_body_and_an_open_one_is_refused() {
        assert_eq!(
            split("# Just text").expect("body"),
            (Front::default(), "# Just text")
        );
        assert_eq!(split("---\nname: x\n"), Err(FrontMatterError::Unclosed));
    }

    #[test]
    fn a_tool_list_is_bounded() {
        let many = format!(
            "---\ntools: [{}]\n---\n",
            vec!["T"; MAX_TOOLS + 1].join(",")
        );
        assert_eq!(split(&many), Err(FrontMatterError::TooManyTools));
    }
}

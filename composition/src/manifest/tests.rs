use std::collections::BTreeMap;

use holarchy_supervision::BrainConfig;
use proptest::prelude::*;

use super::*;

const FULL: &str = r#"
name = "maintainer"
skills = ["triage", "release-notes"]

[role]
prompt_file = "roles/maintainer.md"

[brain.command]
program = "examples/brains/triage.py"
args = ["--quiet"]
env = { B = "2", A = "1" }

[[ingress]]
source = "webhook"
provider = "github"
secret_env = "GH_WEBHOOK_SECRET"
events = ["issues", "pull_request"]

[[ingress]]
source = "schedule"
cron = "0 9 * * MON-FRI"
payload = { kind = "daily-report" }

[[ingress]]
source = "trigger"

[constraints]
deny_tools = ["DetachWorkspace"]
require_approval = ["ExecCommand"]
max_turns_per_hour = 60
"#;

fn files() -> BTreeMap<String, String> {
    BTreeMap::from([(
        "roles/maintainer.md".to_owned(),
        "You keep the project moving.".to_owned(),
    )])
}

#[test]
fn a_full_manifest_resolves_every_part() {
    let spec = parse(FULL, &files()).expect("parses");
    assert_eq!(spec.name, "maintainer");
    let role = spec.role.as_ref().expect("a role");
    assert_eq!(role.text, "You keep the project moving.");
    match spec.brain.as_ref().expect("a brain") {
        BrainConfig::Command {
            program,
            env,
            timeout_ms,
            ..
        } => {
            assert_eq!(program, "examples/brains/triage.py");
            // Sorted, so the digest does not depend on the file's order.
            assert_eq!(env, &[("A".into(), "1".into()), ("B".into(), "2".into())]);
            assert_eq!(*timeout_ms, 60_000);
        }
        other => panic!("not a command brain: {other:?}"),
    }
    assert_eq!(spec.skills, ["triage", "release-notes"]);
    assert_eq!(
        spec.webhook(Provider::Github),
        Some((
            "GH_WEBHOOK_SECRET",
            &["issues".to_owned(), "pull_request".to_owned()][..]
        ))
    );
    assert!(matches!(
        &spec.ingress[1],
        Ingress::Schedule { cron, timezone: None, payload } if cron == "0 9 * * MON-FRI" && payload == r#"{"kind":"daily-report"}"#
    ));
    assert!(spec.has("trigger") && !spec.has("publish"));
    assert_eq!(spec.limits.deny, ["DetachWorkspace"]);
    assert_eq!(spec.limits.require_approval, ["ExecCommand"]);
    assert_eq!(spec.limits.max_turns_per_hour, Some(60));
    assert_eq!(spec.limits.allow, None);
}

#[test]
fn the_digest_changes_with_the_spec_and_only_then() {
    let a = parse(FULL, &files()).expect("parses");
    let b = parse(FULL, &files()).expect("parses");
    assert_eq!(a.digest(), b.digest());
    let mut other_role = files();
    other_role.insert("roles/maintainer.md".into(), "Be brief.".into());
    let c = parse(FULL, &other_role).expect("parses");
    assert_ne!(a.digest(), c.digest());
}

#[test]
fn an_anthropic_brain_takes_its_defaults() {
    let spec = parse(
        "name = \"a\"\n[brain.anthropic]\nmodel = \"claude-sonnet-4-5\"",
        &BTreeMap::new(),
    )
    .expect("parses");
    assert_eq!(
        spec.brain,
        Some(BrainConfig::Anthropic {
            base_url: "https://api.anthropic.com".into(),
            model: "claude-sonnet-4-5".into(),
            api_key_env: "ANTHROPIC_API_KEY".into(),
            max_tokens: 8192,
            max_steps: None,
            temperature: None,
        })
    );
    let written = r#"
name = "a"
brain = { anthropic = { model = "claude-opus-4-1", base_url = "http://127.0.0.1:8080", api_key_env = "TEAM_CLAUDE_KEY", max_tokens = 2000, temperature = 0.2, max_steps = 12 } }
"#;
    let spec = parse(written, &BTreeMap::new()).expect("parses");
    assert_eq!(
        spec.brain,
        Some(BrainConfig::Anthropic {
            base_url: "http://127.0.0.1:8080".into(),
            model: "claude-opus-4-1".into(),
            api_key_env: "TEAM_CLAUDE_KEY".into(),
            max_tokens: 2000,
            max_steps: Some(12),
            temperature: Some(0.2),
        })
    );
}

#[test]
fn a_bare_manifest_is_a_name() {
    let spec = parse("name = \"solo\"", &BTreeMap::new()).expect("parses");
    assert_eq!(spec.role, None);
    assert_eq!(spec.brain, None);
    assert!(spec.ingress.is_empty() && spec.skills.is_empty() && spec.limits.is_empty());
}

#[test]
fn mistakes_are_named() {
    let cases: &[(&str, &str)] = &[
        ("name = \"Bad Name\"", "name"),
        ("name = \"a\"\ncolour = \"red\"", "unknown field"),
        ("name = \"a\"\n[role]\nprompt_file = \"gone.md\"", "gone.md"),
        (
            "name = \"a\"\n[role]\nprompt = \"x\"\nprompt_file = \"y\"",
            "one of",
        ),
        ("name = \"a\"\n[role]\nprompt = \" \"", "empty"),
        ("name = \"a\"\n[brain.command]\nprogram = \"\"", "program"),
        ("name = \"a\"\n[brain.telepathy]\n", "unknown variant"),
        ("name = \"a\"\n[brain.anthropic]\n", "missing field `model`"),
        (
            "name = \"a\"\n[brain.anthropic]\nmodel = \"m\"\nmax_tokens = 0",
            "max_tokens",
        ),
        (
            "name = \"a\"\n[brain.anthropic]\nmodel = \"m\"\napi_key_env = \"sk-ant-1\"",
            "api_key_env",
        ),
        (
            "name = \"a\"\n[brain.anthropic]\nmodel = \"m\"\ntemperature = 1.5",
            "temperature",
        ),
        (
            "name = \"a\"\n[brain.anthropic]\nmodel = \"m\"\nmax_token = 5",
            "unexpected keys in table: max_token",
        ),
        ("name = \"a\"\nskills = [\"x\", \"x\"]", "twice"),
        ("name = \"a\"\nskills = [\"../etc\"]", "not a valid name"),
        (
            "name = \"a\"\n[[ingress]]\nsource = \"webhook\"\nprovider = \"github\"\nsecret_env = \"lower\"",
            "secret_env",
        ),
        (
            "name = \"a\"\n[[ingress]]\nsource = \"webhook\"\nprovider = \"gitlab\"\nsecret_env = \"S\"",
            "unknown variant",
        ),
        (
            "name = \"a\"\n[[ingress]]\nsource = \"trigger\"\n[[ingress]]\nsource = \"trigger\"",
            "second",
        ),
        (
            "name = \"a\"\n[[ingress]]\nsource = \"trigger\"\nextra = 1",
            "unknown field",
        ),
        ("name = \"a\"\n[constraints]\nmax_turns_per_hour = 0", "max_turns_per_hour"),
        (
            "name = \"a\"\n[[ingress]]\nsource = \"schedule\"\ncron = \"0 9 * * FUNDAY\"",
            "ingress",
        ),
        (
            "name = \"a\"\n[[ingress]]\nsource = \"schedule\"\ncron = \"0 9 * * *\"\ntimezone = \"Mars/Olympus\"",
            "ingress",
        ),
    ];
    for (text, word) in cases {
        let err = parse(text, &files()).expect_err(text).to_string();
        assert!(err.contains(word), "{text:?} gave {err:?}, not {word:?}");
    }
    let huge = format!("name = \"a\"\n# {}", "x".repeat(MAX_MANIFEST_BYTES));
    assert!(matches!(
        parse(&huge, &files()),
        Err(ManifestError::TooLarge { .. })
    ));
}

#[test]
fn references_are_checked_against_the_daemon() {
    let spec = parse(FULL, &files()).expect("parses");
    let tools = ["DetachWorkspace", "ExecCommand"];
    let skills = |name: &str| matches!(name, "triage" | "release-notes");
    let no_notes = |name: &str| name == "triage";
    let github = |name: &str| name == "github";
    let none = |_: &str| false;
    let known = |skill, mcp_server, tools| Known {
        skill,
        mcp_server,
        tools,
    };
    assert_eq!(
        check_references(&spec, &known(&skills, &none, &tools)),
        Ok(())
    );
    assert_eq!(
        check_references(&spec, &known(&no_notes, &none, &tools)),
        Err(ManifestError::UnknownSkill("release-notes".into()))
    );
    assert_eq!(
        check_references(&spec, &known(&skills, &none, &["ExecCommand"])),
        Err(ManifestError::UnknownTool("DetachWorkspace".into()))
    );
    let with_mcp = format!("mcp_servers = [\"github\", \"docs\"]\n{FULL}");
    let spec = parse(&with_mcp, &files()).expect("parses");
    assert_eq!(
        check_references(&spec, &known(&skills, &github, &tools)),
        Err(ManifestError::UnknownMcpServer("docs".into()))
    );
    let both = |name: &str| matches!(name, "github" | "docs");
    assert_eq!(
        check_references(&spec, &known(&skills, &both, &tools)),
        Ok(())
    );
}

#[test]
fn a_context_budget_and_mcp_servers_are_taken_within_bounds() {
    let spec = parse(
        "name = \"a\"\ncontext_tokens = 64000\nmcp_servers = [\"github\", \"docs\"]",
        &files(),
    )
    .expect("parses");
    assert_eq!(spec.context_tokens, Some(64_000));
    assert_eq!(spec.mcp_servers, ["github", "docs"]);
    let plain = parse("name = \"a\"", &files()).expect("parses");
    assert_eq!(plain.context_tokens, None);
    assert!(plain.mcp_servers.is_empty());
    let refused = [
        ("name = \"a\"\ncontext_tokens = 10", "context_tokens"),
        (
            "name = \"a\"\ncontext_tokens = 99999999999",
            "context_tokens",
        ),
        ("name = \"a\"\ncontext_tokens = -1", "not valid"),
        ("name = \"a\"\nmcp_servers = [\"x\", \"x\"]", "twice"),
        ("name = \"a\"\nmcp_servers = [\"../x\"]", "mcp_servers"),
    ];
    for (text, word) in refused {
        let err = parse(text, &files()).expect_err(text).to_string();
        assert!(err.contains(word), "{text:?} gave {err:?}, not {word:?}");
    }
    let many: Vec<String> = (0..=MAX_LIST).map(|i| format!("s{i}")).collect();
    let text = format!("name = \"a\"\nmcp_servers = {many:?}");
    assert!(matches!(
        parse(&text, &files()),
        Err(ManifestError::TooMany {
            field: "mcp_servers",
            ..
        })
    ));
}

#[test]
fn a_network_policy_is_taken_and_a_wrong_one_refused() {
    let sealed = parse("name = \"a\"\nnetwork = \"none\"", &files()).expect("parses");
    assert_eq!(sealed.network, holarchy_supervision::NetworkPolicy::None);
    let narrow = parse("name = \"a\"\nnetwork = \"8080,443\"", &files()).expect("parses");
    assert_eq!(
        narrow.network,
        holarchy_supervision::NetworkPolicy::Ports(vec![443, 8080])
    );
    let plain = parse("name = \"a\"", &files()).expect("parses");
    assert_eq!(plain.network, holarchy_supervision::NetworkPolicy::Full);
    // Writing the default out changes nothing, its digest included.
    let full = parse("name = \"a\"\nnetwork = \"full\"", &files()).expect("parses");
    assert_eq!(full.digest(), plain.digest());
    assert_ne!(sealed.digest(), plain.digest());
    for text in [
        "name = \"a\"\nnetwork = \"all\"",
        "name = \"a\"\nnetwork = \"0\"",
    ] {
        let err = parse(text, &files()).expect_err(text).to_string();
        assert!(err.starts_with("network: "), "{text:?} gave {err:?}");
    }
}

/// A spec as the first release kept it: the fields its digest covered.
#[derive(serde::Serialize)]
struct FirstSpec<'a> {
    name: &'a str,
    role: &'a Option<holarchy_supervision::Role>,
    brain: &'a Option<BrainConfig>,
    skills: &'a [String],
    ingress: Vec<FirstIngress<'a>>,
    limits: &'a holarchy_supervision::ToolLimits,
}

/// An ingress as the first release kept it.
#[derive(serde::Serialize)]
enum FirstIngress<'a> {
    Webhook {
        provider: Provider,
        secret_env: &'a str,
        events: &'a [String],
    },
    Schedule {
        cron: &'a str,
        timezone: &'a Option<String>,
        payload: &'a str,
    },
    Trigger,
    Publish,
}

fn first_ingress(ingress: &Ingress) -> FirstIngress<'_> {
    match ingress {
        Ingress::Webhook {
            provider,
            secret_env,
            events,
            ..
        } => FirstIngress::Webhook {
            provider: *provider,
            secret_env,
            events,
        },
        Ingress::Schedule {
            cron,
            timezone,
            payload,
        } => FirstIngress::Schedule {
            cron,
            timezone,
            payload,
        },
        Ingress::Trigger => FirstIngress::Trigger,
        Ingress::Publish => FirstIngress::Publish,
    }
}

#[test]
fn a_spec_without_the_newer_fields_keeps_its_first_digest() {
    let spec = parse(FULL, &files()).expect("parses");
    let first = FirstSpec {
        name: &spec.name,
        role: &spec.role,
        brain: &spec.brain,
        skills: &spec.skills,
        ingress: spec.ingress.iter().map(first_ingress).collect(),
        limits: &spec.limits,
    };
    let json = serde_json::to_vec(&first).expect("json");
    assert_eq!(spec.digest(), hex::encode(Sha256::digest(&json)));
    let budgeted = parse(&format!("context_tokens = 4000\n{FULL}"), &files()).expect("parses");
    assert_ne!(budgeted.digest(), spec.digest());
    let with_mcp = parse(&format!("mcp_servers = [\"github\"]\n{FULL}"), &files()).expect("parses");
    assert_ne!(with_mcp.digest(), spec.digest());
    assert_ne!(with_mcp.digest(), budgeted.digest());
    let windowed = FULL.replace(
        "events = [\"issues\", \"pull_request\"]",
        "events = [\"issues\", \"pull_request\"]\nreplay_window = \"7d\"",
    );
    let windowed = parse(&windowed, &files()).expect("parses");
    assert_ne!(windowed.digest(), spec.digest());
}

fn github_webhook(extra: &str) -> String {
    format!(
        "name = \"hook\"\n[[ingress]]\nsource = \"webhook\"\nprovider = \"github\"\nsecret_env = \"S\"\n{extra}"
    )
}

#[test]
fn a_github_webhook_bounds_replays_for_a_week_unless_told_otherwise() {
    let plain = parse(&github_webhook(""), &files()).expect("parses");
    assert_eq!(
        plain.replay_window_s(Provider::Github),
        Some(DEFAULT_REPLAY_WINDOW_S)
    );
    assert_eq!(plain.replay_window_s(Provider::Generic), None);
    for (given, seconds) in [
        ("\"90s\"", Some(90)),
        ("\"30m\"", Some(1800)),
        ("\"12h\"", Some(43_200)),
        ("\"365d\"", Some(MAX_REPLAY_WINDOW_S)),
        ("\"0\"", None),
    ] {
        let spec = parse(
            &github_webhook(&format!("replay_window = {given}")),
            &files(),
        )
        .unwrap_or_else(|err| panic!("{given}: {err}"));
        assert_eq!(spec.replay_window_s(Provider::Github), seconds, "{given}");
    }
    for bad in [
        "\"\"",
        "\"7\"",
        "\"d\"",
        "\"-1d\"",
        "\"1w\"",
        "\"366d\"",
        "\"1.5h\"",
        "\"99999999999999999999d\"",
        "7",
    ] {
        let text = github_webhook(&format!("replay_window = {bad}"));
        assert!(parse(&text, &files()).is_err(), "{bad}");
    }
    let generic = "name = \"hook\"\n[[ingress]]\nsource = \"webhook\"\nprovider = \"generic\"\nsecret_env = \"S\"\nreplay_window = \"1h\"";
    let err = parse(generic, &files()).expect_err("generic").to_string();
    assert!(err.contains("replay_window"), "{err}");
}

proptest! {
    #[test]
    fn any_text_parses_or_is_refused_without_panic(text in ".{0,400}") {
        let _ = parse(&text, &files());
    }

    #[test]
    fn skill_lists_within_bounds_round_trip(
        skills in proptest::collection::btree_set("[a-z][a-z0-9-]{0,20}", 0..MAX_SKILLS)
    ) {
        let list: Vec<String> = skills.into_iter().collect();
        let text = format!("name = \"p\"\nskills = {}", serde_json::to_string(&list).expect("json"));
        let spec = parse(&text, &files()).expect("parses");
        prop_assert_eq!(spec.skills, list);
    }
}

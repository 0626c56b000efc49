use super::*;
use proptest::prelude::*;

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn deny(names: &[&str]) -> ToolRules {
    ToolRules {
        deny: set(names),
        ..ToolRules::default()
    }
}

fn allow(names: &[&str]) -> ToolRules {
    ToolRules {
        allow: Some(set(names)),
        ..ToolRules::default()
    }
}

fn approval(names: &[&str]) -> ToolRules {
    ToolRules {
        require_approval: set(names),
        ..ToolRules::default()
    }
}

#[test]
fn no_rules_allow_everything() {
    assert_eq!(Policy::new().evaluate("ExecCommand"), Verdict::Allow);
}

#[test]
fn layers_order_system_first() {
    assert!(Layer::System > Layer::Config && Layer::Config > Layer::Prompt);
    assert_eq!(Layer::Config.as_str(), "config");
}

#[test]
fn config_deny_names_its_layer() {
    let policy = Policy::new().with(Layer::Config, deny(&["ExecCommand"]));
    assert_eq!(
        policy.evaluate("ExecCommand"),
        Verdict::Deny {
            layer: Layer::Config,
            reason: "ExecCommand is denied by the instance's configuration".into()
        }
    );
    assert_eq!(policy.evaluate("Sleep"), Verdict::Allow);
}

#[test]
fn prompt_allow_list_cannot_lift_config_deny() {
    let policy = Policy::new()
        .with(Layer::Config, deny(&["ExecCommand"]))
        .with(Layer::Prompt, allow(&["ExecCommand"]));
    assert!(matches!(
        policy.evaluate("ExecCommand"),
        Verdict::Deny {
            layer: Layer::Config,
            ..
        }
    ));
}

#[test]
fn allow_list_omission_denies_and_says_so() {
    let policy = Policy::new().with(Layer::Prompt, allow(&["Sleep"]));
    let Verdict::Deny { layer, reason } = policy.evaluate("ApplyPatch") else {
        panic!("an omitted tool must be denied");
    };
    assert_eq!(layer, Layer::Prompt);
    assert!(reason.contains("allow list"), "{reason}");
    assert_eq!(policy.evaluate("Sleep"), Verdict::Allow);
}

#[test]
fn highest_denying_layer_is_reported() {
    let policy = Policy::new()
        .with(Layer::System, allow(&["Sleep"]))
        .with(Layer::Config, deny(&["ExecCommand"]));
    assert!(matches!(
        policy.evaluate("ExecCommand"),
        Verdict::Deny {
            layer: Layer::System,
            ..
        }
    ));
}

#[test]
fn approval_needs_no_deny_and_reports_highest_layer() {
    let policy = Policy::new()
        .with(Layer::Config, approval(&["ExecCommand"]))
        .with(Layer::Prompt, approval(&["ExecCommand", "Sleep"]));
    assert_eq!(
        policy.evaluate("ExecCommand"),
        Verdict::RequireApproval {
            layer: Layer::Config
        }
    );
    assert_eq!(
        policy.evaluate("Sleep"),
        Verdict::RequireApproval {
            layer: Layer::Prompt
        }
    );
    let denied = policy.with(Layer::System, deny(&["Sleep"]));
    assert!(matches!(denied.evaluate("Sleep"), Verdict::Deny { .. }));
}

#[test]
fn validate_names_the_first_unknown_tool() {
    let known = ["ExecCommand", "Sleep"];
    let rules = ToolRules {
        allow: Some(set(&["Sleep"])),
        deny: set(&["ExecCommand"]),
        require_approval: set(&["Exec"]),
    };
    assert_eq!(
        rules.validate(&known),
        Err(ConstraintError::UnknownTool {
            tool: "Exec".into(),
            list: "require_approval"
        })
    );
    assert_eq!(allow(&["Sleep"]).validate(&known), Ok(()));
    assert!(allow(&["sleep"]).validate(&known).is_err());
}

#[test]
fn turn_rate_bounds() {
    assert!(TurnRate::new(0).is_err());
    assert!(TurnRate::new(MAX_TURNS_PER_HOUR + 1).is_err());
    assert_eq!(TurnRate::new(60).map(TurnRate::max_per_hour), Ok(60));
}

#[test]
fn turn_rate_refuses_until_the_oldest_start_is_an_hour_old() {
    let rate = TurnRate::new(2).expect("a valid rate");
    let mut window = TurnWindow::new();
    assert_eq!(rate.admits(&window, 1_000), Ok(()));
    window.record(rate, 1_000);
    assert_eq!(rate.admits(&window, 2_000), Ok(()));
    window.record(rate, 2_000);
    assert_eq!(rate.admits(&window, 3_000), Err(1_000 + HOUR_MS));
    assert_eq!(rate.admits(&window, 1_000 + HOUR_MS), Ok(()));
    window.record(rate, 1_000 + HOUR_MS);
    assert_eq!(
        window.len(),
        2,
        "only the last max_per_hour starts are kept"
    );
    assert_eq!(rate.admits(&window, 1_001 + HOUR_MS), Err(2_000 + HOUR_MS));
}

#[test]
fn stored_types_round_trip_through_bincode() {
    let config = bincode::config::standard();
    let policy = Policy::new()
        .with(Layer::System, allow(&["Sleep", "ExecCommand"]))
        .with(Layer::Config, deny(&["ExecCommand"]))
        .with(Layer::Prompt, approval(&["Sleep"]));
    let bytes = bincode::serde::encode_to_vec(&policy, config).expect("encodes");
    let (back, _): (Policy, usize) =
        bincode::serde::decode_from_slice(&bytes, config).expect("decodes");
    assert_eq!(back, policy);

    let rate = TurnRate::new(7).expect("a valid rate");
    let mut window = TurnWindow::new();
    window.record(rate, 5);
    window.record(rate, 9);
    let bytes = bincode::serde::encode_to_vec((rate, &window), config).expect("encodes");
    let (back, _): ((TurnRate, TurnWindow), usize) =
        bincode::serde::decode_from_slice(&bytes, config).expect("decodes");
    assert_eq!(back, (rate, window));

    for verdict in [
        Verdict::Allow,
        policy.evaluate("ExecCommand"),
        policy.evaluate("Sleep"),
    ] {
        let bytes = bincode::serde::encode_to_vec(&verdict, config).expect("encodes");
        let (back, _): (Verdict, usize) =
            bincode::serde::decode_from_slice(&bytes, config).expect("decodes");
        assert_eq!(back, verdict);
    }
}

// ---- properties over a small alphabet, so that rules and calls collide.

const TOOLS: [&str; 4] = ["ExecCommand", "Sleep", "ApplyPatch", "SpawnAgent"];

fn tool_set() -> impl Strategy<Value = BTreeSet<String>> {
    proptest::collection::btree_set(
        proptest::sample::select(&TOOLS[..]).prop_map(String::from),
        0..4,
    )
}

fn rules() -> impl Strategy<Value = ToolRules> {
    (proptest::option::of(tool_set()), tool_set(), tool_set()).prop_map(
        |(allow, deny, require_approval)| ToolRules {
            allow,
            deny,
            require_approval,
        },
    )
}

fn policy() -> impl Strategy<Value = Policy> {
    (rules(), rules(), rules()).prop_map(|(system, config, prompt)| Policy {
        system,
        config,
        prompt,
    })
}

fn layer() -> impl Strategy<Value = Layer> {
    proptest::sample::select(&Layer::HIGHEST_FIRST[..])
}

/// Allow < RequireApproval < Deny.
fn strictness(verdict: &Verdict) -> u8 {
    match verdict {
        Verdict::Allow => 0,
        Verdict::RequireApproval { .. } => 1,
        Verdict::Deny { .. } => 2,
    }
}

/// `rules` with `extra` added: more denies, more approvals, an allow list
/// intersected (adding an allow list is a narrowing; lengthening one is not
/// adding a rule).
fn narrowed(rules: &ToolRules, extra: &ToolRules) -> ToolRules {
    let allow = match (&rules.allow, &extra.allow) {
        (None, None) => None,
        (Some(a), None) | (None, Some(a)) => Some(a.clone()),
        (Some(a), Some(b)) => Some(a.intersection(b).cloned().collect()),
    };
    ToolRules {
        allow,
        deny: rules.deny.union(&extra.deny).cloned().collect(),
        require_approval: rules
            .require_approval
            .union(&extra.require_approval)
            .cloned()
            .collect(),
    }
}

proptest! {
    #[test]
    fn adding_rules_never_loosens(policy in policy(), at in layer(), extra in rules(), tool in proptest::sample::select(&TOOLS[..])) {
        let before = policy.evaluate(tool);
        let stricter = narrowed(policy.rules(at), &extra);
        let after = policy.clone().with(at, stricter).evaluate(tool);
        prop_assert!(strictness(&after) >= strictness(&before), "{before:?} became {after:?}");
    }

    #[test]
    fn a_higher_deny_holds_whatever_lower_layers_say(policy in policy(), at in layer(), tool in proptest::sample::select(&TOOLS[..])) {
        let mut policy = policy;
        policy.rules_mut(at).deny.insert(tool.to_string());
        match policy.evaluate(tool) {
            Verdict::Deny { layer, .. } => prop_assert!(layer >= at),
            other => prop_assert!(false, "expected a deny, got {other:?}"),
        }
    }

    #[test]
    fn the_reported_layer_is_the_highest_refusing_one(policy in policy(), tool in proptest::sample::select(&TOOLS[..])) {
        let refusing = |layer: Layer| {
            let rules = policy.rules(layer);
            rules.deny.contains(tool) || rules.allow.as_ref().is_some_and(|a| !a.contains(tool))
        };
        let highest = Layer::HIGHEST_FIRST.into_iter().find(|&l| refusing(l));
        let asking = Layer::HIGHEST_FIRST.into_iter().find(|&l| policy.rules(l).require_approval.contains(tool));
        match (policy.evaluate(tool), highest, asking) {
            (Verdict::Deny { layer, reason }, Some(expected), _) => {
                prop_assert_eq!(layer, expected);
                prop_assert!(reason.starts_with(tool));
            }
            (Verdict::RequireApproval { layer }, None, Some(expected)) => prop_assert_eq!(layer, expected),
            (Verdict::Allow, None, None) => {}
            (verdict, highest, asking) => prop_assert!(false, "{verdict:?} with refusing {highest:?}, asking {asking:?}"),
        }
    }

    #[test]
    fn evaluate_never_panics(policy in policy(), tool in any::<String>()) {
        let _ = policy.evaluate(&tool);
    }

    /// Whatever the attempts, the admitted starts never exceed the rate in
    /// any hour, the window stays bounded, and a refusal names a time that
    /// is then admitted.
    #[test]
    fn turn_rate_holds_over_any_hour(max in 1u32..6, gaps in proptest::collection::vec(0u64..1_500_000, 1..60)) {
        let rate = TurnRate::new(max).expect("a valid rate");
        let mut window = TurnWindow::new();
        let mut admitted: Vec<u64> = Vec::new();
        let mut now = 0u64;
        for gap in gaps {
            now += gap;
            match rate.admits(&window, now) {
                Ok(()) => {
                    window.record(rate, now);
                    admitted.push(now);
                }
                Err(at) => {
                    prop_assert!(at > now);
                    prop_assert_eq!(rate.admits(&window, at), Ok(()));
                }
            }
            prop_assert!(window.len() <= max as usize);
        }
        for &t in &admitted {
            let in_hour = admitted.iter().filter(|&&s| s <= t && s + HOUR_MS > t).count();
            prop_assert!(in_hour <= max as usize, "{in_hour} starts in the hour ending {t}");
        }
    }
}

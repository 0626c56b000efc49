//! The projection's invariants under random attach, detach and activate.

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    Attach(usize, usize),
    Detach(usize),
    Activate(usize, usize),
}

const IDS: [&str; 4] = ["agent_home", "src", "docs", "Bad Id"];
const DIRS: [&str; 5] = ["/home/a", "/repo", "/repo/sub", "/docs", "/home/a/x"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4usize, 0..5usize).prop_map(|(i, d)| Op::Attach(i, d)),
        (0..4usize).prop_map(Op::Detach),
        (0..4usize, 0..5usize).prop_map(|(i, d)| Op::Activate(i, d)),
    ]
}

proptest! {
    #[test]
    fn the_active_directory_is_always_inside_an_attached_root(
        ops in proptest::collection::vec(op(), 0..40),
    ) {
        let home = Path::new("/home/a");
        let mut p = Projection::home_only(AgentId::generate(), 0);
        for op in ops {
            let before = p.clone();
            let result = match op {
                Op::Attach(i, d) => p.attach(Binding {
                    workspace_id: IDS[i].into(),
                    root: DIRS[d].into(),
                }),
                Op::Detach(i) => p.detach(IDS[i]).map(|_| ()),
                Op::Activate(i, d) => p.activate(home, IDS[i], DIRS[d].into()),
            };
            if result.is_err() {
                prop_assert_eq!(&p, &before, "a refused change changed something");
            }
            let place = p.active_place(home);
            let root = p.root_of(home, &place.workspace_id);
            prop_assert!(root.is_some_and(|r| place.dir.starts_with(r)));
            let mut ids: Vec<_> = p.attached.iter().map(|b| &b.workspace_id).collect();
            ids.sort();
            ids.dedup();
            prop_assert_eq!(ids.len(), p.attached.len());
            prop_assert!(p.attached.iter().all(|b| check_id(&b.workspace_id).is_ok()));
        }
    }
}

#[test]
fn detaching_the_active_workspace_goes_home() {
    let home = Path::new("/home/a");
    let mut p = Projection::home_only(AgentId::generate(), 0);
    p.attach(Binding {
        workspace_id: "src".into(),
        root: "/repo".into(),
    })
    .expect("attach");
    p.activate(home, "src", "/repo/sub".into()).expect("use");
    assert_eq!(p.active_place(home).dir, Path::new("/repo/sub"));
    p.detach("src").expect("detach");
    assert_eq!(p.active_place(home).workspace_id, AGENT_HOME);
    assert_eq!(p.detach(AGENT_HOME), Err(WorkspaceRefusal::Builtin));
}

#[test]
fn the_deepest_root_owns_a_directory() {
    let home = Path::new("/home/a");
    let mut p = Projection::home_only(AgentId::generate(), 0);
    for (id, root) in [("repo", "/repo"), ("sub", "/repo/sub")] {
        p.attach(Binding {
            workspace_id: id.into(),
            root: root.into(),
        })
        .expect("attach");
    }
    assert_eq!(
        p.owner_of(home, Path::new("/repo/sub/x")).as_deref(),
        Some("sub")
    );
    assert_eq!(
        p.owner_of(home, Path::new("/repo/y")).as_deref(),
        Some("repo")
    );
    assert_eq!(
        p.owner_of(home, Path::new("/home/a/z")).as_deref(),
        Some(AGENT_HOME)
    );
    assert_eq!(p.owner_of(home, Path::new("/etc")), None);
}

#[test]
fn roots_attached_without_an_id_get_a_free_one_from_their_name() {
    let mut p = Projection::home_only(AgentId::generate(), 0);
    assert_eq!(p.id_for_root(Path::new("/src/My Repo")), "my-repo");
    p.attach(Binding {
        workspace_id: "repo".into(),
        root: "/a/repo".into(),
    })
    .expect("attach");
    assert_eq!(p.id_for_root(Path::new("/b/repo")), "repo-2");
    assert_eq!(p.id_for_root(Path::new("/")), "workspace");
    assert_eq!(p.id_for_root(Path::new("/x/agent_home")), "workspace");
}

#[test]
fn children_inherit_the_set_and_public_ones_never_the_active_workspace() {
    let home = Path::new("/home/a");
    let child = AgentId::generate();
    let mut p = Projection::home_only(AgentId::generate(), 0);
    assert_eq!(p.for_public_child(child, 1), None);
    assert_eq!(p.inherited(child, 1), None);
    p.attach(Binding {
        workspace_id: "repo".into(),
        root: "/repo".into(),
    })
    .expect("attach");
    p.activate(home, "repo", "/repo/sub".into()).expect("use");
    let public = p.for_public_child(child, 1).expect("a set to inherit");
    assert_eq!((public.agent_id, public.active.as_ref()), (child, None));
    assert_eq!(public.attached, p.attached);
    let private = p.inherited(child, 1).expect("a set to inherit");
    assert_eq!(private.active, p.active);
    // A parent in a directory of its own home: the child gets its own home.
    p.activate(home, AGENT_HOME, "/home/a/x".into())
        .expect("use");
    let private = p.inherited(child, 1).expect("a set to inherit");
    assert_eq!(private.active, None);
    let confined = Projection::confined(child, "wt".into(), "/w".into(), "/w/sub".into(), 1);
    assert_eq!(confined.active_place(home).dir, Path::new("/w/sub"));
    assert_eq!(confined.roots(home), [home.to_owned(), "/w".into()]);
}

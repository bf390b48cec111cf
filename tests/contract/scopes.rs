//! Whose files a call sees (src/scope.rs): the State tier is per session
//! within a namespace, the Store and object tiers per namespace, and the Filesystem
//! tier is one directory every caller shares; a branch is one view
//! whatever the call's scope. A legitimate difference, so each answer is
//! asserted exactly.

use crate::harness::{Kind, Tier, expect_err};
use agentvfs::scope::Scope;
use tonic::Code;

/// A file written in the default scope, looked at from another session
/// of the same namespace and from another namespace.
pub fn scopes_see_what_their_tier_shares(t: &Tier) {
    t.write("f", "mine");
    let other_session = Scope {
        session: "other".into(),
        ..t.scope.clone()
    };
    let other_namespace = Scope {
        namespace: "other".into(),
        ..t.scope.clone()
    };
    let path = t.path("f");
    let (session_sees, namespace_sees) = match t.kind {
        // In a branch the branch decides whose files a call sees (its
        // base's session and namespace, docs/branches.md): every scope
        // reaching it sees the same files. The registry is per namespace,
        // so through the service another namespace does not reach it.
        _ if t.branch => (true, true),
        Kind::State => (false, false),
        Kind::Store | Kind::Object => (true, false),
        Kind::Filesystem => (true, true),
    };
    for (scope, sees) in [
        (other_session, session_sees),
        (other_namespace, namespace_sees),
    ] {
        let read = t.backend.read(&scope, &path);
        if sees {
            assert_eq!(read.unwrap().0, b"mine", "{scope:?}");
        } else {
            expect_err(read, Code::NotFound, &format!("not found: {path}"));
            let listed = t.backend.list(&scope, &t.mount).unwrap();
            assert!(
                listed.iter().all(|e| e.path != t.base),
                "{scope:?} lists {listed:?}"
            );
            // Its own file at the same path leaves the default scope's alone.
            t.backend
                .write(&scope, &path, b"theirs".to_vec(), Default::default())
                .unwrap();
            assert_eq!(t.content("f"), b"mine");
            t.backend.delete(&scope, &path, None, false).unwrap();
        }
    }
    assert_eq!(t.content("f"), b"mine");
}

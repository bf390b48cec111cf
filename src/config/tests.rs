use super::*;

#[test]
fn embedded_default_listens_on_loopback_without_principals() {
    let c = embedded_default();
    assert_eq!(c.listen.to_string(), "127.0.0.1:50051");
    let prefixes: Vec<_> = c.mounts.iter().map(|m| m.prefix.to_string()).collect();
    assert_eq!(prefixes, ["/", "/memories", "/workspace"]);
    assert!(c.principals.is_empty());
    assert_eq!(
        c.access,
        AccessConfig {
            anonymous: true,
            operator_token_file: None
        }
    );
}

#[test]
fn example_file_is_valid() {
    let c = parse(
        "agentvfs.example.toml",
        include_str!("../../agentvfs.example.toml"),
    )
    .unwrap();
    assert_eq!(c.principals.len(), 2);
    assert!(!c.access.anonymous);
}

#[test]
fn access_section_allows_only_safe_combinations() {
    const MOUNT: &str = "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n";
    const PRINCIPAL: &str = "[[principal]]\nname=\"a\"\ntoken=\"12345678\"\n";
    let closed = parse(
        "x.toml",
        &format!("{MOUNT}[access]\nanonymous = false\noperator_token_file = \"op.token\"\n"),
    )
    .unwrap();
    assert_eq!(
        closed.access,
        AccessConfig {
            anonymous: false,
            operator_token_file: Some(PathBuf::from("op.token"))
        }
    );
    assert!(
        !parse("x.toml", &format!("{MOUNT}{PRINCIPAL}"))
            .unwrap()
            .access
            .anonymous
    );
    let err = |src: String| parse("x.toml", &src).unwrap_err().to_string();
    assert_eq!(
        err(format!("{MOUNT}{PRINCIPAL}[access]\nanonymous = true\n")),
        "x.toml:8: access anonymous = true is refused with [[principal]] configured: every \
         request without a token would hold every right"
    );
    assert_eq!(
        err(format!("{MOUNT}[access]\nanonymous = false\n")),
        "x.toml:5: access anonymous = false with no [[principal]] needs operator_token_file: \
         nobody could call the server"
    );
    for (src, line) in [
        (
            format!("{MOUNT}[access]\noperator_token_file = \"op.token\"\n"),
            5,
        ),
        (
            format!("{MOUNT}{PRINCIPAL}[access]\noperator_token_file = \"op.token\"\n"),
            8,
        ),
    ] {
        assert!(
            err(src).starts_with(&format!(
                "x.toml:{line}: access operator_token_file is only for anonymous = false"
            )),
            "line {line}"
        );
    }
    assert_eq!(
        err(format!(
            "{MOUNT}[access]\nanonymous = false\noperator_token_file = \"\"\n"
        )),
        "x.toml:6: access operator_token_file must name a file"
    );
}

#[test]
fn tools_section_has_defaults_and_bounds() {
    let t = embedded_default().tools;
    assert_eq!(t.root.as_str(), "/");
    assert_eq!(t.large_result_prefix.as_str(), DEFAULT_LARGE_RESULT_PREFIX);
    assert_eq!((t.max_output_lines, t.max_output_bytes), (2000, 51200));
    let src = "[tools]\nmax_output_lines = 10\n[[mount]]\nprefix=\"/\"\ntier=\"state\"\n";
    assert_eq!(
        parse("x.toml", src).unwrap_err().to_string(),
        "x.toml:2: tools max_output_lines must be at least 200"
    );
}

#[test]
fn limits_section_has_defaults_and_bounds() {
    assert_eq!(embedded_default().limits, LimitsConfig::default());
    let mount = "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n";
    let src = format!(
        "[limits]\nmax_streams_per_principal = 8\nstream_idle_timeout_seconds = 2\n{mount}"
    );
    let limits = parse("x.toml", &src).unwrap().limits;
    assert_eq!(limits.max_streams_per_principal, 8);
    assert_eq!(limits.stream_idle_timeout, Duration::from_secs(2));
    let src = format!("[limits]\nmax_concurrent_searches = 0\n{mount}");
    assert_eq!(
        parse("x.toml", &src).unwrap_err().to_string(),
        "x.toml:2: limits max_concurrent_searches must be between 1 and 64"
    );
}

#[test]
fn mcp_section_has_defaults_and_bounds() {
    assert_eq!(embedded_default().mcp, McpConfig::default());
    let mount = "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n";
    let src = format!(
        "[mcp]\nhttp = false\nallowed_hosts = [\"vfs.example.com\"]\nmax_sessions = 3\n{mount}"
    );
    let mcp = parse("x.toml", &src).unwrap().mcp;
    assert!(!mcp.http);
    assert_eq!(mcp.allowed_hosts, ["vfs.example.com"]);
    assert_eq!(mcp.max_sessions, 3);
    let src = format!("[mcp]\nallowed_hosts = []\n{mount}");
    assert!(
        parse("x.toml", &src)
            .unwrap_err()
            .to_string()
            .starts_with("x.toml:2: mcp allowed_hosts must list host names")
    );
    let src = format!("[mcp]\nmax_sessions = 0\n{mount}");
    assert_eq!(
        parse("x.toml", &src).unwrap_err().to_string(),
        "x.toml:2: mcp max_sessions must be between 1 and 65536"
    );
}

#[test]
fn state_max_sessions_has_a_default_and_a_floor() {
    assert_eq!(
        embedded_default().state.max_sessions,
        DEFAULT_STATE_MAX_SESSIONS
    );
    let src =
        |n: u32| format!("[state]\nmax_sessions = {n}\n[[mount]]\nprefix=\"/\"\ntier=\"state\"\n");
    assert_eq!(parse("x.toml", &src(3)).unwrap().state.max_sessions, 3);
    assert_eq!(
        parse("x.toml", &src(0)).unwrap_err().to_string(),
        "x.toml:2: state max_sessions must be at least 1"
    );
}

#[test]
fn principal_names_are_unique() {
    let p = |token: &str| format!("[[principal]]\nname=\"a\"\ntoken=\"{token}\"\n");
    let src = format!(
        "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n{}{}",
        p("token-0001"),
        p("token-0002")
    );
    assert_eq!(
        parse("x.toml", &src).unwrap_err().to_string(),
        "x.toml:8: two principals are named \"a\""
    );
}

#[test]
fn key_prefixes_are_plain_segments() {
    for good in ["", "prod", "prod/", "/team-a/agents_1/", "a.b/c!*'()"] {
        assert!(valid_key_prefix(good), "{good:?}");
    }
    for bad in [
        "a//b",
        "//",
        "a/../b",
        "./a",
        "a b",
        "a\\b",
        "é",
        &"x".repeat(257),
    ] {
        assert!(!valid_key_prefix(bad), "{bad:?}");
    }
    let src =
        "[[mount]]\nprefix = \"/s\"\ntier = \"object\"\nbucket = \"b\"\nkey_prefix = \"a//b\"\n";
    assert_eq!(
        parse("x.toml", src).unwrap_err().to_string(),
        "x.toml:5: mount /s: key_prefix \"a//b\" must be at most 256 bytes of segments of \
         letters, digits and -_.!*'() (not . or ..) joined by single slashes"
    );
}

#[test]
fn object_settings_on_another_tier_are_refused() {
    for (line, expected) in [
        ("bucket = \"b\"", "bucket"),
        ("path_style = true", "path_style"),
        ("cache_bytes = 1", "cache_bytes"),
        ("request_timeout_seconds = 5", "request_timeout_seconds"),
    ] {
        let src = format!("[[mount]]\nprefix = \"/\"\ntier = \"state\"\n{line}\n");
        assert_eq!(
            parse("x.toml", &src).unwrap_err().to_string(),
            format!("x.toml:4: mount /: tier \"state\" takes no `{expected}`")
        );
    }
}

#[test]
fn errors_name_file_line_and_problem() {
    let src = "listen = \"127.0.0.1:1\"\n[[mount]]\nprefix = \"/\"\ntier = \"cloud\"\n";
    let err = parse("x.toml", src).unwrap_err();
    assert_eq!(
        err.to_string(),
        "x.toml:4: unknown tier \"cloud\"; expected \"state\", \"store\", \"filesystem\" or \"object\""
    );
    let err = parse("x.toml", "[[mount]]\nprefix = \"rel/\"\ntier = \"state\"\n").unwrap_err();
    assert_eq!(err.line, Some(2));
    let err = parse("x.toml", "bogus = 1\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("x.toml:1: unknown field `bogus`"),
        "{err}"
    );
    let bad_op = "[[mount]]\nprefix=\"/\"\ntier=\"state\"\n[[principal]]\nname=\"a\"\ntoken=\"12345678\"\ngrants=[{prefix=\"/\", ops=[\"read\"]}]\n";
    assert!(
        parse("x.toml", bad_op)
            .unwrap_err()
            .to_string()
            .contains("x.toml:7: unknown operation \"read\"")
    );
}

//! What the benchmarks of the object tier share: a server whose object
//! mounts reach the test S3 server (versitygw on loopback,
//! `tests/support/s3.rs`).

#[path = "../../tests/support/s3.rs"]
#[allow(dead_code)] // a benchmark uses the server, not every helper
pub mod s3;

use crate::support::Served;
use std::path::Path;

/// A server with State at `/` and `mount` (TOML of one `[[mount]]` at
/// `/data`), run in `dir`, reaching the test S3 server.
#[allow(dead_code)] // a benchmark that sets limits uses `serve_with` only
pub fn serve(dir: &Path, mount: &str) -> Served {
    serve_with(dir, "", mount)
}

/// [`serve`] with `head` (TOML before the mounts, such as `[limits]`) at
/// the top of its configuration.
pub fn serve_with(dir: &Path, head: &str, mount: &str) -> Served {
    std::fs::create_dir_all(dir).expect("server dir");
    let config = format!("{head}[[mount]]\nprefix = \"/\"\ntier = \"state\"\n\n{mount}");
    std::fs::write(dir.join("agentvfs.toml"), config).expect("config");
    let s3 = s3::s3();
    // Served inherits the environment: point the object tier at versitygw.
    // SAFETY: set before any thread of the benchmark reads the environment.
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL", &s3.endpoint);
        std::env::set_var("AWS_ACCESS_KEY_ID", s3::ACCESS_KEY);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", s3::SECRET_KEY);
        std::env::set_var("AWS_ALLOW_HTTP", "true");
    }
    Served::start(["--config", "agentvfs.toml"], dir)
}

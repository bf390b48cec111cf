//! `[tools]`: the LLM tools' project root and output budget, read into
//! [`ToolsConfig`].

use super::{ConfigError, Source};
use crate::path::VfsPath;
use crate::tools::{
    DEFAULT_LARGE_RESULT_PREFIX, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_OUTPUT_LINES, ToolsConfig,
};
use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTools {
    root: Option<Spanned<String>>,
    large_result_prefix: Option<Spanned<String>>,
    max_output_lines: Option<Spanned<u64>>,
    max_output_bytes: Option<Spanned<u64>>,
}

/// Validates `[tools]`.
pub(super) fn parse(src: &Source<'_>, t: Option<&RawTools>) -> Result<ToolsConfig, ConfigError> {
    let logical = |field: Option<&Spanned<String>>, name: &str, default: &str| match field {
        // The defaults are constants this module's tests parse.
        None => Ok(VfsPath::parse(default).expect("default tools paths are valid")),
        Some(r) => VfsPath::parse(r.get_ref())
            .map_err(|e| src.at(r.span().start, format!("tools {name}: {e}"))),
    };
    // Below 200 lines / 4 KiB a head-and-tail preview has no room left.
    let bounded = |field: Option<&Spanned<u64>>, name: &str, min: u64, default: u64| {
        let value = src.in_range(field, min..=u64::MAX, || {
            format!("tools {name} must be at least {min}")
        })?;
        Ok::<_, ConfigError>(value.unwrap_or(default))
    };
    Ok(ToolsConfig {
        root: logical(t.and_then(|t| t.root.as_ref()), "root", "/")?,
        large_result_prefix: logical(
            t.and_then(|t| t.large_result_prefix.as_ref()),
            "large_result_prefix",
            DEFAULT_LARGE_RESULT_PREFIX,
        )?,
        max_output_lines: bounded(
            t.and_then(|t| t.max_output_lines.as_ref()),
            "max_output_lines",
            200,
            DEFAULT_MAX_OUTPUT_LINES,
        )?,
        max_output_bytes: bounded(
            t.and_then(|t| t.max_output_bytes.as_ref()),
            "max_output_bytes",
            4096,
            DEFAULT_MAX_OUTPUT_BYTES,
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{embedded_default, parse};

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
}

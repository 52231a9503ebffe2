//! What several commands share in their arguments.

/// `--listen`: an address, or `None` for `off`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Listen(pub(crate) Option<std::net::SocketAddr>);

pub(crate) fn parse_listen(value: &str) -> Result<Listen, String> {
    if value.eq_ignore_ascii_case("off") {
        return Ok(Listen(None));
    }
    value.parse().map(|addr| Listen(Some(addr))).map_err(|e| {
        format!(
            "{e}: give HOST:PORT with an IP address (e.g. 127.0.0.1:9876 or 0.0.0.0:9876), or off"
        )
    })
}

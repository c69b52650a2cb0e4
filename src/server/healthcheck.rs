//! `helixor-pack healthcheck --url URL`: one plain HTTP/1.1 GET over a
//! `TcpStream` within a 2 s budget, for container health checks and exec
//! probes in images without a shell or curl. Reads nothing but the status line.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The whole probe's time budget.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// Splits `http://host:port/path` into the address and the path.
fn parse_url(url: &str) -> Result<(String, String, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("`{url}` is not an http:// URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(format!("`{url}` has no host"));
    }
    let has_port = match authority.rfind(':') {
        Some(i) => !authority[i..].contains(']'),
        None => false,
    };
    let addr = if has_port {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok((addr, authority.to_string(), path.to_string()))
}

/// GETs `url`; `Ok(())` on HTTP 200, else why not.
pub fn check(url: &str) -> Result<(), String> {
    let deadline = Instant::now() + TIMEOUT;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| "timed out".to_string())
    };
    let (addr, host, path) = parse_url(url)?;
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {addr}"))?;
    let mut stream = TcpStream::connect_timeout(&sock, left()?)
        .map_err(|e| format!("cannot connect to {sock}: {e}"))?;
    stream
        .set_write_timeout(Some(left()?))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: helixor-healthcheck\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("cannot send the request: {e}"))?;
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 256];
    while !head.windows(2).any(|w| w == b"\r\n") && head.len() < 4096 {
        stream
            .set_read_timeout(Some(left()?))
            .map_err(|e| e.to_string())?;
        let n = stream
            .read(&mut buf)
            .map_err(|e| format!("no answer: {e}"))?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let status_line = line.lines().next().unwrap_or_default();
    let code = status_line.split_whitespace().nth(1).unwrap_or_default();
    if code == "200" {
        Ok(())
    } else if status_line.is_empty() {
        Err("no HTTP answer".into())
    } else {
        // The status line is the server's text: no escape sequence of it
        // reaches the terminal.
        Err(format!(
            "answered `{}`",
            crate::error::escape_controls(status_line)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("http://127.0.0.1:8080/healthz").unwrap(),
            (
                "127.0.0.1:8080".into(),
                "127.0.0.1:8080".into(),
                "/healthz".into()
            )
        );
        assert_eq!(
            parse_url("http://localhost").unwrap(),
            ("localhost:80".into(), "localhost".into(), "/".into())
        );
        assert!(parse_url("https://x/").is_err());
        assert!(parse_url("http:///x").is_err());
    }

    #[test]
    fn refused_connection_fails() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        assert!(check(&format!("http://{addr}/healthz")).is_err());
    }
}

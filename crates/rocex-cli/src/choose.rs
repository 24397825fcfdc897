//! Which `rocexd` a tool talks to: `--socket`, else `rocex_verbs::default_socket`'s rule
//! (`$ROCEX_SOCKET`, else the only daemon answering in the socket directory). When several
//! answer and the user is at a terminal, the tool lists them and asks which one; elsewhere
//! (a script, a pipe) the error lists them and asks for `--socket`.

use std::io::{BufRead, IsTerminal, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rocex_verbs::Error;

/// The daemon's socket for a tool given `flag` (its `--socket`).
pub(crate) fn daemon(flag: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(p) = flag {
        return Ok(p.to_owned());
    }
    match rocex_verbs::default_socket() {
        Err(Error::SeveralDaemons { dir, daemons })
            if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() =>
        {
            ask(&mut std::io::stdin().lock(), &dir, daemons)
        }
        found => found,
    }
}

/// Lists `daemons` on stderr and reads the number of one from `input`; an answer that
/// names none (or no answer) gives the listing error back.
fn ask(
    input: &mut impl BufRead,
    dir: &Path,
    daemons: Vec<(PathBuf, IpAddr)>,
) -> Result<PathBuf, Error> {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{} rocexd answer in {}:", daemons.len(), dir.display());
    for (i, (path, addr)) in daemons.iter().enumerate() {
        let _ = writeln!(err, "  {}) {}  (address {addr})", i + 1, path.display());
    }
    let _ = write!(err, "which one? [1-{}] ", daemons.len());
    let _ = err.flush();
    let mut line = String::new();
    let chosen = input
        .read_line(&mut line)
        .ok()
        .and_then(|_| line.trim().parse::<usize>().ok())
        .and_then(|n| n.checked_sub(1))
        .filter(|&i| i < daemons.len());
    match chosen {
        Some(i) => Ok(daemons[i].0.clone()),
        None => Err(Error::SeveralDaemons {
            dir: dir.to_owned(),
            daemons,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_picks_a_daemon_and_anything_else_lists_them_again() {
        let daemons = || {
            vec![
                (PathBuf::from("/d/a.sock"), IpAddr::from([10, 0, 0, 1])),
                (PathBuf::from("/d/b.sock"), IpAddr::from([10, 0, 0, 2])),
            ]
        };
        let dir = Path::new("/d");
        let got = ask(&mut "2\n".as_bytes(), dir, daemons()).unwrap();
        assert_eq!(got, PathBuf::from("/d/b.sock"));
        for bad in ["0\n", "3\n", "b\n", ""] {
            let e = ask(&mut bad.as_bytes(), dir, daemons()).unwrap_err();
            assert!(matches!(e, Error::SeveralDaemons { .. }), "{bad:?}: {e}");
        }
    }
}

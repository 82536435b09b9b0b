//! Error messages about files that hold secrets without the secrets: parsers quote the
//! offending source line or value, and that text is often the key or token itself.
//! Positions stay, quoted source text goes.

use std::path::Path;

use kube::config::Kubeconfig;

/// Shortest run of source text treated as possibly secret when a message quotes it.
const MIN_QUOTED: usize = 6;

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || "+/=_-.~".contains(c)
}

/// `message` with every word it shares with `source` (six characters or more, or part
/// of such a word of the source) replaced by `***`.
pub fn without_source(message: &str, source: &str) -> String {
    let quoted: Vec<&str> = source
        .split(|c: char| !is_word(c))
        .filter(|t| t.len() >= MIN_QUOTED)
        .collect();
    let mut out = String::with_capacity(message.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let secret = word.len() >= MIN_QUOTED
            && quoted
                .iter()
                .any(|q| q.contains(word.as_str()) || word.contains(q));
        out.push_str(if secret { "***" } else { word });
        word.clear();
    };
    for c in message.chars() {
        if is_word(c) {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Reads a kubeconfig (tokens, client keys). kube's parse error renders a snippet of the
/// file around the offending line: the snippet goes (what and where stay), and any
/// source text left in the message is blanked out.
pub fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    Kubeconfig::from_yaml(&text)
        .map_err(|e| without_source(&without_snippets(&e.to_string()), &text))
}

/// `message` without the source snippets YAML parse errors render (` --> <input>:6:12`,
/// then numbered source lines and a caret line), for errors whose source this code
/// never sees: kube inferring its configuration from `KUBECONFIG` or `~/.kube/config`
/// reads and parses the file itself.
pub fn without_snippets(message: &str) -> String {
    let snippet_line = |line: &str| {
        let t = line.trim_start();
        t.starts_with("-->")
            || t.trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_start()
                .starts_with('|')
    };
    message
        .lines()
        .filter(|line| !snippet_line(line))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_source_words_are_replaced_and_the_rest_kept() {
        let source = "token: wJalrXUtnFEMIK7MDENG\nserver: x";
        assert_eq!(
            without_source(
                "invalid type: string \"wJalrXUtnFEMIK7MDENG\", expected a map at line 1 column 8",
                source
            ),
            "invalid type: string \"***\", expected a map at line 1 column 8"
        );
        // A part of a source word counts too (a parser may crop a long value).
        assert_eq!(without_source("found `wJalrXUtn`", source), "found `***`");
        assert_eq!(without_source("unclosed quote", source), "unclosed quote");
        assert_eq!(without_source("", source), "");
    }

    #[test]
    fn a_kubeconfig_parse_error_says_where_and_quotes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        for body in [
            "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: [wJalrXUtnFEMIK7MDENG\n",
            "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: abc12\n  bad\n",
            "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: wJalrXUtnFEMIK7MDENG\n",
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    insecure-skip-tls-verify: wJalrXUtnFEMIK7MDENG\n",
        ] {
            std::fs::write(&path, body).unwrap();
            let message = read_kubeconfig(&path).unwrap_err();
            assert!(message.contains("line "), "{message}");
            assert!(
                !message.contains("wJalrXUtn") && !message.contains("abc12"),
                "{message}"
            );
        }
    }

    #[test]
    fn snippets_go_and_the_rest_of_the_message_stays() {
        let message = "failed to infer config: kubeconfig: (failed to parse kubeconfig YAML: error: line 6 column 12: expected string scalar\n --> <input>:6:12\n  |\n4 | - name: u\n5 |   user:\n6 |     token: [wJalrXUtnFEMIK7MDENG\n  |            ^ expected string scalar): more";
        assert_eq!(
            without_snippets(message),
            "failed to infer config: kubeconfig: (failed to parse kubeconfig YAML: error: line 6 column 12: expected string scalar"
        );
        assert_eq!(
            without_snippets("one line | with a bar"),
            "one line | with a bar"
        );
    }
}

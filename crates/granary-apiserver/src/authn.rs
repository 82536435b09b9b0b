//! Who a request is: the server's own admin token, or a user of kube-apiserver's static
//! token file (`--token-auth-file`), a CSV of `token,user,uid,"group1,group2"` lines.
//! The admin is in `system:masters` and is never checked against RBAC (and may
//! impersonate, as the server's own token always could); token-file users are
//! authorized by [`super::rbac`]. Every authenticated user is also in
//! `system:authenticated`.

use subtle::ConstantTimeEq;

/// An authenticated user, as RBAC sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// The outcome of authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    /// The server's own token: `system:masters`, no authorization.
    Admin,
    User(UserInfo),
}

/// The group every authenticated user is in.
pub(crate) const AUTHENTICATED: &str = "system:authenticated";

/// Parses a static token file. Errors name the line and what is wrong with it, never
/// the token.
pub(crate) fn parse_token_file(text: &str) -> Result<Vec<(String, UserInfo)>, String> {
    let mut users: Vec<(String, UserInfo)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let fields = csv_fields(line).map_err(|why| format!("line {n}: {why}"))?;
        if fields.len() < 3 {
            return Err(format!(
                "line {n}: expected token,user,uid[,\"group1,group2\"], found {} fields",
                fields.len()
            ));
        }
        let token = fields[0].trim().to_string();
        if token.is_empty() {
            return Err(format!("line {n}: the token is empty"));
        }
        let name = fields[1].trim().to_string();
        if name.is_empty() {
            return Err(format!("line {n}: the user name is empty"));
        }
        let mut groups: Vec<String> = fields
            .get(3)
            .map(|g| {
                g.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        if users.iter().any(|(t, _)| *t == token) {
            return Err(format!(
                "line {n}: the token of user {name:?} is used twice"
            ));
        }
        users.push((
            token,
            UserInfo {
                name,
                uid: fields[2].trim().to_string(),
                groups,
            },
        ));
    }
    Ok(users)
}

/// Splits one CSV line: comma-separated, a field may be double-quoted (with `""` for a
/// quote inside).
fn csv_fields(line: &str) -> Result<Vec<String>, &'static str> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.trim().is_empty() && !was_quoted => {
                cur.clear();
                quoted = true;
                was_quoted = true;
            }
            (',', false) => {
                fields.push(std::mem::take(&mut cur));
                was_quoted = false;
            }
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return Err("a quoted field is not closed");
    }
    fields.push(cur);
    Ok(fields)
}

/// Maps bearer tokens to identities.
#[derive(Debug, Default)]
pub(crate) struct Authenticator {
    admin_token: String,
    users: Vec<(String, UserInfo)>,
}

impl Authenticator {
    pub(crate) fn new(admin_token: String, users: Vec<(String, UserInfo)>) -> Self {
        Authenticator { admin_token, users }
    }

    /// The identity of a presented token. Compared in constant time per token, so the
    /// answer's timing does not reveal how much of a guess was right.
    pub(crate) fn authenticate(&self, presented: &[u8]) -> Option<Identity> {
        if bool::from(presented.ct_eq(self.admin_token.as_bytes())) {
            return Some(Identity::Admin);
        }
        let mut found = None;
        for (token, user) in &self.users {
            if bool::from(presented.ct_eq(token.as_bytes())) {
                found = Some(Identity::User(user.clone()));
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_lines_as_kube_apiserver_reads_them() {
        let users = parse_token_file(
            "t-alice,alice,uid-1,\"devs,ops\"\n\nt-bob,bob,uid-2\nt-carol, carol ,uid-3,\"\"\n",
        )
        .unwrap();
        assert_eq!(users.len(), 3);
        assert_eq!(users[0].0, "t-alice");
        assert_eq!(
            users[0].1,
            UserInfo {
                name: "alice".into(),
                uid: "uid-1".into(),
                groups: vec!["devs".into(), "ops".into(), AUTHENTICATED.into()],
            }
        );
        assert_eq!(users[1].1.groups, [AUTHENTICATED]);
        assert_eq!(users[2].1.name, "carol");
    }

    #[test]
    fn bad_lines_are_refused_naming_the_line_not_the_token() {
        for (text, why) in [
            ("secret-token,alice\n", "line 1: expected"),
            ("ok,a,1\n,bob,2\n", "line 2: the token is empty"),
            ("secret-token,,1\n", "line 1: the user name is empty"),
            (
                "secret-token,a,1,\"devs\n",
                "line 1: a quoted field is not closed",
            ),
            (
                "secret-token,a,1\nsecret-token,b,2\n",
                "line 2: the token of user \"b\"",
            ),
        ] {
            let e = parse_token_file(text).unwrap_err();
            assert!(e.starts_with(why), "{text:?}: {e}");
            assert!(!e.contains("secret-token"), "{e}");
        }
    }

    #[test]
    fn tokens_map_to_identities() {
        let users = parse_token_file("t-alice,alice,1\n").unwrap();
        let auth = Authenticator::new("admin-token".into(), users);
        assert_eq!(auth.authenticate(b"admin-token"), Some(Identity::Admin));
        assert!(
            matches!(auth.authenticate(b"t-alice"), Some(Identity::User(u)) if u.name == "alice")
        );
        assert_eq!(
            auth.authenticate(b"t-alic"),
            None,
            "a prefix is not the token"
        );
        assert_eq!(auth.authenticate(b"t-alicee"), None);
        assert_eq!(auth.authenticate(b"admin-tokem"), None);
        assert_eq!(auth.authenticate(b""), None);
    }
}

//! An object's UID as kept per item in the compact structures of large backups and
//! restores ([`super::ManifestSpool`], the restore's item heads).

/// An object's UID as kept per item: a UUID (what Kubernetes assigns) in 16 bytes, any
/// other text as it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Uid {
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Uid {
    pub fn parse(s: &str) -> Uid {
        parse_uuid(s)
            .map(Uid::Uuid)
            .unwrap_or_else(|| Uid::Text(s.into()))
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, Uid::Text(t) if t.is_empty())
    }

    /// Heap bytes it holds.
    pub fn heap_bytes(&self) -> u64 {
        match self {
            Uid::Uuid(_) => 0,
            Uid::Text(t) => t.len() as u64,
        }
    }
}

impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uid::Text(t) => f.write_str(t),
            Uid::Uuid(b) => {
                for (i, byte) in b.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        f.write_str("-")?;
                    }
                    write!(f, "{byte:02x}")?;
                }
                Ok(())
            }
        }
    }
}

/// The 16 bytes of a lowercase canonical UUID (`8-4-4-4-12` hex digits); anything else
/// (upper case included, so that it prints back the same) is `None`.
fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut n = 0;
    let mut i = 0;
    while i < 36 {
        if matches!(i, 8 | 13 | 18 | 23) {
            if b[i] != b'-' {
                return None;
            }
            i += 1;
            continue;
        }
        let hex = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        out[n] = (hex(b[i])? << 4) | hex(b[i + 1])?;
        n += 1;
        i += 2;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_kept_in_16_bytes_and_print_back() {
        let s = "00000000-0000-4000-8000-000000000042";
        let u = Uid::parse(s);
        assert!(matches!(u, Uid::Uuid(_)));
        assert_eq!(u.to_string(), s);
        for other in [
            "",
            "u-dep",
            "00000000-0000-4000-8000-00000000004G",
            "00000000-0000-4000-8000-00000000004A",
        ] {
            let u = Uid::parse(other);
            assert!(matches!(u, Uid::Text(_)), "{other}");
            assert_eq!(u.to_string(), other);
        }
        assert!(Uid::parse("").is_empty());
    }
}

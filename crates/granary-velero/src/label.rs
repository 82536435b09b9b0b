//! Velero's shortening of label values that exceed Kubernetes' 63-character limit
//! (`label.GetValidName`): keep the first 57 characters and append the first 6 hex
//! characters of the sha256 of the whole value. Used for `velero.io/backup-name`,
//! `velero.io/restore-name` and `velero.io/storage-location`.

use std::borrow::Cow;

use sha2::{Digest, Sha256};

/// The longest label value Kubernetes accepts.
pub const MAX_LABEL_VALUE_LEN: usize = 63;
const HASH_CHARS: usize = 6;

/// Returns `value` unchanged when it fits in a label value, otherwise its first 57
/// characters followed by the first 6 hex digits of its sha256.
///
/// Velero slices bytes; the values it shortens (object names) are ASCII, where bytes and
/// characters coincide. For non-ASCII input the cut moves back to a character boundary so
/// the result stays valid UTF-8.
pub fn valid_label_value(value: &str) -> Cow<'_, str> {
    if value.len() <= MAX_LABEL_VALUE_LEN {
        return Cow::Borrowed(value);
    }
    let mut cut = MAX_LABEL_VALUE_LEN - HASH_CHARS;
    while !value.is_char_boundary(cut) {
        cut -= 1;
    }
    let digest = Sha256::digest(value.as_bytes());
    let mut out = String::with_capacity(MAX_LABEL_VALUE_LEN);
    out.push_str(&value[..cut]);
    for byte in &digest[..HASH_CHARS / 2] {
        out.push_str(&format!("{byte:02x}"));
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_kept() {
        assert_eq!(valid_label_value("backup-1"), "backup-1");
        let exactly = "a".repeat(63);
        assert_eq!(valid_label_value(&exactly), exactly);
    }

    #[test]
    fn long_values_are_cut_to_57_plus_6_hex() {
        let long = "b".repeat(64);
        let got = valid_label_value(&long);
        assert_eq!(got.len(), 63);
        assert_eq!(&got[..57], &long[..57]);
        let hex: String = Sha256::digest(long.as_bytes())[..3]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(&got[57..], hex);
        // Golden values, computed independently (Python hashlib).
        assert_eq!(got, format!("{}a0fab1", "b".repeat(57)));
        assert_eq!(
            valid_label_value(
                "this-is-a-very-long-backup-name-that-is-longer-than-sixty-three-characters"
            ),
            "this-is-a-very-long-backup-name-that-is-longer-than-sixty58e11b"
        );
    }

    #[test]
    fn two_long_values_with_same_prefix_differ() {
        let a = format!("{}-a", "x".repeat(70));
        let b = format!("{}-b", "x".repeat(70));
        assert_ne!(valid_label_value(&a), valid_label_value(&b));
    }

    #[test]
    fn non_ascii_stays_valid_utf8() {
        let v = "é".repeat(40);
        let got = valid_label_value(&v);
        assert!(got.len() <= 63);
    }
}

//! File names inside a trace: cpu numbering and path safety.

use std::path::{Component, Path};

/// `cpu/<n>` names are canonical decimal numbers: no sign, no leading zero.
pub fn canonical_cpu(name: &str) -> Option<u32> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if name.len() > 1 && name.starts_with('0') {
        return None;
    }
    name.parse().ok()
}

/// True when `rel` stays inside the trace directory: relative, no `..`,
/// no root or prefix components.
pub fn is_safe_relative(rel: &Path) -> bool {
    let mut depth = 0usize;
    for c in rel.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            _ => return false,
        }
    }
    depth > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_names() {
        assert_eq!(canonical_cpu("0"), Some(0));
        assert_eq!(canonical_cpu("12"), Some(12));
        assert_eq!(canonical_cpu("07"), None);
        assert_eq!(canonical_cpu("x"), None);
        assert_eq!(canonical_cpu("-1"), None);
    }

    #[test]
    fn safety() {
        assert!(is_safe_relative(Path::new("cpu/0")));
        assert!(is_safe_relative(Path::new("./cpu/0")));
        assert!(!is_safe_relative(Path::new("../x")));
        assert!(!is_safe_relative(Path::new("cpu/../../x")));
        assert!(!is_safe_relative(Path::new("/etc/passwd")));
        assert!(!is_safe_relative(Path::new("")));
    }
}

//! `--columns` patterns: `*` matches any run of characters, `?` one
//! character, everything else itself (brackets too: instance names are
//! written `metric[instance]`, so `[` must match literally).

pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with one backtrack point (the last `*`): linear in
    // practice, never exponential.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        assert!(matches("kernel.all.*", "kernel.all.load[1 minute]"));
        assert!(matches("*[1 minute]", "kernel.all.load[1 minute]"));
        assert!(matches(
            "kernel.all.load[1 minute]",
            "kernel.all.load[1 minute]"
        ));
        assert!(matches("mem.util.fre?", "mem.util.free"));
        assert!(matches("*", ""));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("a*b*c", "axxbyy"));
        assert!(!matches("kernel.all.load", "kernel.all.load[1 minute]"));
        assert!(!matches("mem.util.fre?", "mem.util.fre"));
        assert!(matches("**x", "abx"));
    }
}

//! A tolerant tokenizer for the XML dialect of LTT event definitions and
//! system.xml (spec 5.11/5.12). LTTV's own parser was hand-written and
//! accepted things a real XML parser rejects (bare attribute values, `/* */`
//! and `//` comments), so this is not an XML parser either: it builds a
//! small element tree, case-folds names and keeps attribute text as written.

/// Deepest element nesting accepted: keeps recursion over the tree bounded.
pub const MAX_DEPTH: usize = 200;

#[derive(Debug, Clone, PartialEq)]
pub struct Attr {
    /// Lower-cased.
    pub name: String,
    /// As written, without the quotes; no entity decoding.
    pub value: String,
    pub quoted: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Elem {
    /// Lower-cased.
    pub name: String,
    pub attrs: Vec<Attr>,
    pub children: Vec<Node>,
    /// Byte offset of the `<` that opened it.
    pub offset: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Elem(Elem),
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct XmlError {
    pub offset: usize,
    pub msg: String,
}

impl Elem {
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|a| a.name == name)
    }
    pub fn attr_str(&self, name: &str) -> Option<&str> {
        self.attr(name).map(|a| a.value.as_str())
    }
    pub fn elems(&self) -> impl Iterator<Item = &Elem> {
        self.children.iter().filter_map(|n| match n {
            Node::Elem(e) => Some(e),
            Node::Text(_) => None,
        })
    }
    pub fn child(&self, name: &str) -> Option<&Elem> {
        self.elems().find(|e| e.name == name)
    }
    /// Concatenated text content of the direct children.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for n in &self.children {
            if let Node::Text(t) = n {
                s.push_str(t);
            }
        }
        s
    }
}

fn err(offset: usize, msg: impl Into<String>) -> XmlError {
    XmlError {
        offset,
        msg: msg.into(),
    }
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b':' | b'-' | b'.')
}

/// Parse a document into its top-level nodes.
pub fn parse(src: &[u8]) -> Result<Vec<Node>, XmlError> {
    let mut p = Parser { s: src, i: 0 };
    // stack of open elements; the root pseudo-element collects top level.
    let mut stack: Vec<Elem> = vec![Elem {
        name: String::new(),
        attrs: vec![],
        children: vec![],
        offset: 0,
    }];
    let mut text: Vec<u8> = Vec::new();
    let flush = |text: &mut Vec<u8>, stack: &mut Vec<Elem>| {
        if !text.is_empty() {
            let t = String::from_utf8_lossy(text).into_owned();
            text.clear();
            if let Some(top) = stack.last_mut() {
                top.children.push(Node::Text(t));
            }
        }
    };
    while p.i < p.s.len() {
        let in_desc = stack.last().is_some_and(|e| e.name == "description");
        let rest = &p.s[p.i..];
        if rest.starts_with(b"<!--") {
            let end = find(rest, b"-->").ok_or_else(|| err(p.i, "unterminated comment"))?;
            p.i += end + 3;
        } else if rest.starts_with(b"<?") {
            let end = find(rest, b"?>").ok_or_else(|| err(p.i, "unterminated <? ?>"))?;
            p.i += end + 2;
        } else if rest.starts_with(b"<!") {
            let end = find(rest, b">").ok_or_else(|| err(p.i, "unterminated <! >"))?;
            p.i += end + 1;
        } else if !in_desc && rest.starts_with(b"/*") {
            let end = find(rest, b"*/").ok_or_else(|| err(p.i, "unterminated /* comment"))?;
            p.i += end + 2;
        } else if !in_desc && rest.starts_with(b"//") {
            let end = find(rest, b"\n").unwrap_or(rest.len());
            p.i += end;
        } else if rest.starts_with(b"</") {
            flush(&mut text, &mut stack);
            let at = p.i;
            p.i += 2;
            p.ws();
            let name = p
                .name()
                .ok_or_else(|| err(p.i, "expected a name after '</'"))?;
            p.ws();
            if p.peek() != Some(b'>') {
                return Err(err(p.i, "expected '>'"));
            }
            p.i += 1;
            if stack.len() < 2 {
                return Err(err(at, format!("unexpected closing tag </{name}>")));
            }
            let top = stack.pop().unwrap_or_else(|| unreachable!());
            if top.name != name {
                return Err(err(
                    at,
                    format!("closing tag </{name}> does not match <{}>", top.name),
                ));
            }
            if let Some(parent) = stack.last_mut() {
                parent.children.push(Node::Elem(top));
            }
        } else if rest[0] == b'<' {
            flush(&mut text, &mut stack);
            let at = p.i;
            p.i += 1;
            let name = p
                .name()
                .ok_or_else(|| err(p.i, "expected an element name after '<'"))?;
            let mut attrs = Vec::new();
            let self_closing;
            loop {
                p.ws();
                match p.peek() {
                    None => return Err(err(at, format!("unterminated tag <{name}"))),
                    Some(b'>') => {
                        p.i += 1;
                        self_closing = false;
                        break;
                    }
                    Some(b'/') if p.s.get(p.i + 1) == Some(&b'>') => {
                        p.i += 2;
                        self_closing = true;
                        break;
                    }
                    Some(_) => {
                        let an = p
                            .name()
                            .ok_or_else(|| err(p.i, format!("bad attribute in <{name}>")))?;
                        p.ws();
                        if p.peek() == Some(b'=') {
                            p.i += 1;
                            p.ws();
                            let (value, quoted) = p.value(&name)?;
                            attrs.push(Attr {
                                name: an,
                                value,
                                quoted,
                            });
                        } else {
                            attrs.push(Attr {
                                name: an,
                                value: String::new(),
                                quoted: false,
                            });
                        }
                    }
                }
            }
            let el = Elem {
                name,
                attrs,
                children: vec![],
                offset: at,
            };
            if self_closing {
                if let Some(top) = stack.last_mut() {
                    top.children.push(Node::Elem(el));
                }
            } else {
                if stack.len() > MAX_DEPTH {
                    return Err(err(at, "elements nested too deeply"));
                }
                stack.push(el);
            }
        } else {
            text.push(rest[0]);
            p.i += 1;
        }
    }
    flush(&mut text, &mut stack);
    if stack.len() > 1 {
        let top = stack.last().map(|e| (e.offset, e.name.clone()));
        let (o, n) = top.unwrap_or_default();
        return Err(err(o, format!("element <{n}> is never closed")));
    }
    Ok(stack.pop().map(|r| r.children).unwrap_or_default())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    /// Whitespace inside a tag; `/* */` comments count as whitespace there.
    fn ws(&mut self) {
        loop {
            while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
                self.i += 1;
            }
            let rest = &self.s[self.i.min(self.s.len())..];
            match rest.starts_with(b"/*").then(|| find(rest, b"*/")).flatten() {
                Some(end) => self.i += end + 2,
                None => return,
            }
        }
    }
    fn name(&mut self) -> Option<String> {
        let start = self.i;
        if !self.peek().is_some_and(is_name_start) {
            return None;
        }
        while self.peek().is_some_and(is_name_char) {
            self.i += 1;
        }
        Some(String::from_utf8_lossy(&self.s[start..self.i]).to_ascii_lowercase())
    }
    fn value(&mut self, el: &str) -> Result<(String, bool), XmlError> {
        match self.peek() {
            Some(q @ (b'"' | b'\'')) => {
                let start = self.i + 1;
                let len = self.s[start..]
                    .iter()
                    .position(|&b| b == q)
                    .ok_or_else(|| {
                        err(self.i, format!("unterminated attribute value in <{el}>"))
                    })?;
                self.i = start + len + 1;
                Ok((
                    String::from_utf8_lossy(&self.s[start..start + len]).into_owned(),
                    true,
                ))
            }
            _ => {
                let start = self.i;
                while let Some(b) = self.peek() {
                    if b.is_ascii_whitespace()
                        || b == b'>'
                        || b == b'<'
                        || (b == b'/' && self.s.get(self.i + 1) == Some(&b'>'))
                    {
                        break;
                    }
                    self.i += 1;
                }
                if self.i == start {
                    return Err(err(start, format!("missing attribute value in <{el}>")));
                }
                Ok((
                    String::from_utf8_lossy(&self.s[start..self.i]).into_owned(),
                    false,
                ))
            }
        }
    }
}

/// Decode the five predefined entities and numeric references (system.xml
/// is real XML; event definitions get no entity decoding).
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let semi = tail.find(';').filter(|&j| j <= 12);
        let rep = semi.and_then(|j| {
            let ent = &tail[1..j];
            let c = match ent {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let n = if let Some(h) = ent.strip_prefix("#x").or(ent.strip_prefix("#X")) {
                        u32::from_str_radix(h, 16).ok()
                    } else if let Some(d) = ent.strip_prefix('#') {
                        d.parse().ok()
                    } else {
                        None
                    };
                    n.and_then(char::from_u32)
                }
            };
            c.map(|c| (c, j))
        });
        match rep {
            Some((c, j)) => {
                out.push(c);
                rest = &tail[j + 1..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Escape text for a quoted attribute or element content.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_and_quoted_attributes_and_comments() {
        let src = b"<!-- c --><Facility NAME=f /* x */>\n// line\n<event name=\"e\"><uint size=4/></event></facility>";
        let nodes = parse(src).unwrap();
        let f = nodes
            .iter()
            .find_map(|n| match n {
                Node::Elem(e) => Some(e),
                _ => None,
            })
            .unwrap();
        assert_eq!(f.name, "facility");
        assert_eq!(f.attr_str("name"), Some("f"));
        let ev = f.child("event").unwrap();
        assert!(ev.attr("name").unwrap().quoted);
        assert_eq!(ev.child("uint").unwrap().attr_str("size"), Some("4"));
    }

    #[test]
    fn mismatched_and_unclosed_are_errors() {
        assert!(parse(b"<a><b></a>").is_err());
        assert!(parse(b"<a>").is_err());
        assert!(parse(b"</a>").is_err());
        assert!(parse(b"<a x=\"1>").is_err());
    }

    #[test]
    fn entities() {
        assert_eq!(decode_entities("a&amp;b&lt;&#65;&bogus;"), "a&b<A&bogus;");
    }
}

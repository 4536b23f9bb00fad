//! Samples derived from events, beside the events (docs/dlt.md, "Arguments
//! and text as samples"):
//!
//! - the numeric verbose arguments of DLT log messages, one metric per
//!   APID, CTID and argument: named by the argument's VARI name, else by
//!   the string argument just before it when that reads as a label
//!   (`"temp" 42` → `LOG.TES1.temp`), else by its position
//!   (`LOG.TES3.arg2`, the events table's column);
//! - `--extract GLOB=REGEX`: the named groups of a regular expression
//!   matched on the message text of the events whose type `category.name`
//!   (DLT: `APID.CTID`) matches GLOB, one metric per group.
//!
//! The events pass unchanged; each event that gives values is followed by
//! one sample holding them, at its time, with the metric descriptors (and,
//! for DLT, the ECU instance) defined before their first use. The ECU of
//! a DLT message is the instance, so several ECUs give one series each.

use crate::error::Result;
use crate::formats::dlt::layout::Msg;
use crate::formats::dlt::reader::{X_RAW, X_VERBOSE};
use crate::formats::kpi::text::{X_APID, X_CTID, X_ECU};
use crate::model::*;
use crate::options::Extract;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;

/// PCP domain of the derived metrics (private use; KPI has 452, the event
/// counters 453, PCP event records 454).
pub const DERIVED_DOMAIN: u32 = 455;
/// Instance domain of the ECUs (DLT sources).
const ECU_INDOM: IndomId = indom_id(DERIVED_DOMAIN, 1);
/// Metrics made at most: a label that is in fact free text must not make
/// a file of a million metrics. Values of further metrics are counted as
/// dropped.
const MAX_METRICS: usize = 10_000;
/// Longest label (in bytes) taken for a metric name.
const MAX_LABEL: usize = 32;

/// What a metric's values are: integers (signed 64 bits) or floats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Int,
    Float,
}

impl Class {
    fn suffix(self) -> &'static str {
        match self {
            Class::Int => "int",
            Class::Float => "float",
        }
    }
}

/// How one numeric argument of a type is named.
#[derive(Debug, Clone)]
struct ArgPlan {
    field: usize,
    class: Class,
    /// The metric name's last part without a label (VARI name or `argN`).
    fixed: String,
    /// The argument has no VARI name and the one before it is a string:
    /// its value may label this one.
    labelled: bool,
    /// The metric of `fixed`, once made.
    metric: Option<MetricId>,
}

/// What a type's events give.
#[derive(Debug, Default)]
struct Plan {
    /// `APID.CTID` (`category.name`) made a metric name prefix.
    prefix: String,
    args: Vec<ArgPlan>,
    /// Indexes of the `--extract` rules whose glob matches the type.
    extracts: Vec<usize>,
    /// Timeline message format (`$name` placeholders), for the text.
    format: Option<String>,
    field_names: Vec<String>,
}

impl Plan {
    fn is_empty(&self) -> bool {
        self.args.is_empty() && self.extracts.is_empty()
    }
}

pub struct Derive {
    inner: Box<dyn TraceReader>,
    /// Numeric DLT arguments as samples.
    args: bool,
    extracts: Vec<Extract>,
    plans: IntMap<EventTypeId, Plan>,
    /// Metric per full name, per class.
    by_name: [HashMap<String, MetricId>; 2],
    used: HashSet<String>,
    metrics: usize,
    /// ECU names in order of appearance (instance = index).
    ecus: Vec<String>,
    queue: VecDeque<Item>,
    /// Scratch: a metric name, the values of one event, message text.
    name: String,
    values: Vec<(MetricId, Value)>,
    text: Vec<u8>,
    spare: Vec<Sample>,
    scratch: Vec<Item>,
    /// Values left out (too many metrics, captures that are no number),
    /// reported when the stream ends.
    over_cap: u64,
    not_numbers: u64,
    big_unsigned: u64,
    reported: bool,
    pub loss: Option<std::rc::Rc<std::cell::RefCell<LossReport>>>,
}

/// A PCP-acceptable metric name component: letters, digits, `_`, starting
/// with a letter.
pub fn pcp_name_part(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 1);
    push_name_part(&mut out, s);
    out
}

fn push_name_part(out: &mut String, s: &str) {
    if !s.starts_with(|c: char| c.is_ascii_alphabetic()) {
        out.push('e');
    }
    out.extend(s.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
}

/// A string argument's value as a label, when it reads as one: after
/// trimming spaces and one trailing `:` or `=`, 1–32 characters, a letter
/// first, then letters, digits, `_`, `-`, `.` and spaces (`"temp"`,
/// `"CPU load:"`, `"rx_bytes="`). Free text is no label.
fn label(s: &str) -> Option<&str> {
    let t = s.trim();
    let t = t
        .strip_suffix(':')
        .or_else(|| t.strip_suffix('='))
        .unwrap_or(t)
        .trim_end();
    let ok = !t.is_empty()
        && t.len() <= MAX_LABEL
        && t.starts_with(|c: char| c.is_ascii_alphabetic())
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ' '));
    ok.then_some(t)
}

/// Is a field name one the DLT reader gives an argument without a VARI
/// name (`argN`, or `argN_N` when repeated)?
fn positional(name: &str) -> bool {
    name.strip_prefix("arg")
        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit() || b == b'_'))
}

fn class_of(t: &FieldType) -> Option<Class> {
    match t {
        FieldType::Int(_) | FieldType::Uint(_) => Some(Class::Int),
        FieldType::Float(_) => Some(Class::Float),
        _ => None,
    }
}

/// A field value as it reads in message text: strings as they are,
/// numbers in their shortest form.
fn push_plain(out: &mut String, v: &Value) {
    match v {
        Value::Str(s) => out.push_str(s),
        Value::I64(x) | Value::Enum(x) => {
            let _ = write!(out, "{x}");
        }
        Value::U64(x) => {
            let _ = write!(out, "{x}");
        }
        Value::F32(x) => {
            let _ = write!(out, "{x}");
        }
        Value::F64(x) => {
            let _ = write!(out, "{x}");
        }
        other => other.push_text(out),
    }
}

impl Derive {
    /// Wrap `inner`; None (it is returned as it is) when there is nothing
    /// to derive.
    pub fn wrap(
        inner: Box<dyn TraceReader>,
        args: bool,
        extracts: &[Extract],
    ) -> std::result::Result<Derive, Box<dyn TraceReader>> {
        if !args && extracts.is_empty() {
            return Err(inner);
        }
        Ok(Derive {
            inner,
            args,
            extracts: extracts.to_vec(),
            plans: IntMap::default(),
            by_name: [HashMap::new(), HashMap::new()],
            used: HashSet::new(),
            metrics: 0,
            ecus: Vec::new(),
            queue: VecDeque::new(),
            name: String::new(),
            values: Vec::new(),
            text: Vec::new(),
            spare: Vec::new(),
            scratch: Vec::new(),
            over_cap: 0,
            not_numbers: 0,
            big_unsigned: 0,
            reported: false,
            loss: None,
        })
    }

    fn define(&mut self, t: &EventType) {
        if t.framing {
            self.plans.remove(&t.id);
            return;
        }
        let full = format!("{}.{}", t.category, t.name);
        let mut p = Plan {
            extracts: (self.extracts.iter().enumerate())
                .filter(|(_, x)| x.glob.matches(&full))
                .map(|(i, _)| i)
                .collect(),
            format: t.format.clone(),
            ..Plan::default()
        };
        push_name_part(&mut p.prefix, &t.category);
        p.prefix.push('.');
        push_name_part(&mut p.prefix, &t.name);
        if self.args && t.extras.bool(X_VERBOSE) == Some(true) {
            for (i, f) in t.fields.iter().enumerate() {
                let Some(class) = class_of(&f.ty) else {
                    continue;
                };
                let vari = !positional(&f.name);
                let before_string = i > 0 && t.fields[i - 1].ty == FieldType::String;
                p.args.push(ArgPlan {
                    field: i,
                    class,
                    fixed: if vari {
                        pcp_name_part(&f.name)
                    } else {
                        format!("arg{i}")
                    },
                    labelled: !vari && before_string,
                    metric: None,
                });
            }
        }
        if !p.extracts.is_empty() && p.format.is_some() {
            p.field_names = t.fields.iter().map(|f| f.name.clone()).collect();
        }
        if p.is_empty() {
            self.plans.remove(&t.id);
        } else {
            self.plans.insert(t.id, p);
        }
    }

    /// The metric of `self.name` (a full name) and `class`, made (and its
    /// descriptor queued) on first use; None past the cap.
    fn metric(
        &mut self,
        class: Class,
        help: impl FnOnce() -> String,
        ecu: bool,
    ) -> Option<MetricId> {
        if let Some(&id) = self.by_name[class as usize].get(self.name.as_str()) {
            return Some(id);
        }
        if self.metrics >= MAX_METRICS {
            self.over_cap += 1;
            return None;
        }
        // A name taken by the other class (one context logging an integer
        // and a float at one place) gets the class as a suffix.
        let mut name = self.name.clone();
        if self.used.contains(&name) {
            name = format!("{name}_{}", class.suffix());
        }
        let n = self.metrics as u32;
        self.metrics += 1;
        let id = pmid(DERIVED_DOMAIN, n >> 10, n & 0x3ff);
        let vtype = match class {
            Class::Int => ValueType::I64,
            Class::Float => ValueType::F64,
        };
        let mut d = MetricDesc::new(id, &name, vtype, Semantics::Instant, Units::NONE);
        d.indom = ecu.then_some(ECU_INDOM);
        d.help_short = Some(help());
        self.queue.push_back(Item::Metric(Arc::new(d)));
        self.used.insert(name);
        self.by_name[class as usize].insert(self.name.clone(), id);
        Some(id)
    }

    /// The ECU instance of a DLT event (a new ECU: the domain again, with
    /// it, queued).
    fn ecu(&mut self, e: &Event) -> InstId {
        let name = match e.extras.str(X_ECU) {
            Some("") | None => "-",
            Some(s) => s,
        };
        if let Some(i) = self.ecus.iter().position(|x| x == name) {
            return i as InstId;
        }
        self.ecus.push(name.to_string());
        self.queue.push_back(Item::Indom(IndomUpdate {
            time: e.time,
            id: ECU_INDOM,
            kind: IndomKind::Full,
            instances: (self.ecus.iter().enumerate())
                .map(|(i, n)| Instance {
                    id: i as InstId,
                    name: n.clone(),
                })
                .collect(),
            removed: Vec::new(),
            extras: Extras::default(),
        }));
        (self.ecus.len() - 1) as InstId
    }

    /// The values of one event's numeric arguments, into `self.values`.
    fn arg_values(&mut self, plan: &mut Plan, e: &Event, ecu: bool) {
        for k in 0..plan.args.len() {
            let a = &plan.args[k];
            let Some(v) = e.fields.get(a.field) else {
                continue;
            };
            let value = match (a.class, v) {
                (Class::Int, Value::I64(x)) => Value::I64(*x),
                (Class::Int, Value::U64(x)) => match i64::try_from(*x) {
                    Ok(x) => Value::I64(x),
                    Err(_) => {
                        self.big_unsigned += 1;
                        continue;
                    }
                },
                // Through its shortest text: 1.1f32 gives 1.1, not
                // 1.100000023841858.
                (Class::Float, Value::F32(x)) => {
                    Value::F64(x.to_string().parse().unwrap_or(*x as f64))
                }
                (Class::Float, Value::F64(x)) => Value::F64(*x),
                _ => continue,
            };
            let lab = match (a.labelled, e.fields.get(a.field - a.labelled as usize)) {
                (true, Some(Value::Str(s))) => label(s),
                _ => None,
            };
            self.name.clear();
            self.name.push_str(&plan.prefix);
            self.name.push('.');
            let id = match lab {
                Some(l) => {
                    push_name_part(&mut self.name, l);
                    // Two arguments with one label: the later by position.
                    let taken = self.by_name[a.class as usize]
                        .get(self.name.as_str())
                        .is_some_and(|id| self.values.iter().any(|(m, _)| m == id));
                    if taken {
                        self.name.truncate(plan.prefix.len() + 1);
                        self.name.push_str(&a.fixed);
                    }
                    let (f, c) = (a.field, a.class);
                    let prefix = &plan.prefix;
                    self.metric(
                        c,
                        || format!("argument {f} of {prefix} messages, by its label"),
                        ecu,
                    )
                }
                None => match a.metric {
                    Some(id) => Some(id),
                    None => {
                        self.name.push_str(&a.fixed);
                        let (f, c) = (a.field, a.class);
                        let prefix = &plan.prefix;
                        let id =
                            self.metric(c, || format!("argument {f} of {prefix} messages"), ecu);
                        plan.args[k].metric = id;
                        id
                    }
                },
            };
            if let Some(id) = id {
                if !self.values.iter().any(|(m, _)| *m == id) {
                    self.values.push((id, value));
                }
            }
        }
    }

    /// The text `--extract` matches: a DLT message's `dlt-convert -a`
    /// payload, a timeline message's format with each `$name` as its
    /// listing shows it (`name(value)`), else the field values separated
    /// by spaces.
    fn message_text(&mut self, plan: &Plan, fields: &[Value], extras: &Extras) -> String {
        self.text.clear();
        if let Some(raw) = extras.bytes(X_RAW) {
            if let Some(m) = Msg::parse(0, raw).or_else(|| Msg::parse_cut(0, raw)) {
                crate::formats::dlt::text::payload(&m, &mut self.text);
                return String::from_utf8_lossy(&self.text).into_owned();
            }
        }
        let mut out = String::new();
        match &plan.format {
            Some(f) => {
                let mut rest = f.as_str();
                while let Some(i) = rest.find('$') {
                    out.push_str(&rest[..i]);
                    let after = &rest[i + 1..];
                    let n = after
                        .find(|c: char| !c.is_ascii_alphanumeric())
                        .unwrap_or(after.len());
                    let k = plan.field_names.iter().position(|x| *x == after[..n]);
                    match k.and_then(|k| fields.get(k)) {
                        // As the timeline's own listing shows it: `a(1)`.
                        Some(v) if n > 0 => {
                            out.push_str(&after[..n]);
                            out.push('(');
                            push_plain(&mut out, v);
                            out.push(')');
                        }
                        _ => out.push_str(&rest[i..i + 1 + n]),
                    }
                    rest = &after[n..];
                }
                out.push_str(rest);
            }
            None => {
                for (i, v) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    push_plain(&mut out, v);
                }
            }
        }
        out
    }

    /// Values of the `--extract` rules of `plan` on `text`.
    fn extract_values(&mut self, plan: &Plan, text: &str, ecu: bool) {
        for &x in &plan.extracts {
            let re = self.extracts[x].re.clone();
            let Some(caps) = re.captures(text) else {
                continue;
            };
            for group in re.capture_names().flatten() {
                let Some(m) = caps.name(group) else { continue };
                let Ok(v) = m.as_str().trim().parse::<f64>() else {
                    self.not_numbers += 1;
                    continue;
                };
                self.name.clear();
                self.name.push_str(&plan.prefix);
                self.name.push('.');
                push_name_part(&mut self.name, group);
                let spec = &self.extracts[x].spec;
                let help = format!("group {group} of --extract '{spec}'");
                if let Some(id) = self.metric(Class::Float, || help, ecu) {
                    if !self.values.iter().any(|(m, _)| *m == id) {
                        self.values.push((id, Value::F64(v)));
                    }
                }
            }
        }
    }

    /// The sample an event gives (definitions it needs queued before it).
    fn derive(&mut self, e: &Event) -> Option<Sample> {
        let mut plan = self.plans.remove(&e.type_id)?;
        let ecu = e.extras.get(X_ECU).is_some();
        self.values.clear();
        // The instance before the metrics: defined before first use.
        let inst = if ecu { self.ecu(e) } else { PM_IN_NULL };
        self.arg_values(&mut plan, e, ecu);
        if !plan.extracts.is_empty() {
            let text = self.message_text(&plan, &e.fields, &e.extras);
            self.extract_values(&plan, &text, ecu);
        }
        self.plans.insert(e.type_id, plan);
        self.sample(e.time, e.raw_clock, inst, &e.extras)
    }

    /// The values gathered, as one sample (of the message's input, when
    /// inputs were merged: its `source` goes with it).
    fn sample(
        &mut self,
        time: Timestamp,
        raw_clock: Option<u64>,
        inst: InstId,
        of: &Extras,
    ) -> Option<Sample> {
        if self.values.is_empty() {
            return None;
        }
        let mut s = self.spare.pop().unwrap_or(Sample {
            time,
            raw_clock,
            metrics: Vec::new(),
            extras: Extras::default(),
        });
        s.time = time;
        s.raw_clock = raw_clock;
        s.extras = Extras::default();
        if let Some(src) = of.get(keys::SOURCE) {
            s.extras.set(keys::SOURCE, src.clone());
        }
        s.metrics.clear();
        s.metrics
            .extend(self.values.drain(..).map(|(metric, v)| MetricValues {
                metric,
                values: Ok(vec![(inst, v)]),
            }));
        Some(s)
    }

    /// An untyped DLT message (an annotation holding its text): matched
    /// by `APID.CTID` from its extras.
    fn derive_annotation(&mut self, a: &Annotation) -> Option<Sample> {
        if self.extracts.is_empty() {
            return None;
        }
        let (Some(apid), Some(ctid)) = (a.extras.str(X_APID), a.extras.str(X_CTID)) else {
            return None;
        };
        let full = format!("{apid}.{ctid}");
        let mut plan = Plan {
            extracts: (self.extracts.iter().enumerate())
                .filter(|(_, x)| x.glob.matches(&full))
                .map(|(i, _)| i)
                .collect(),
            ..Plan::default()
        };
        if plan.extracts.is_empty() {
            return None;
        }
        push_name_part(&mut plan.prefix, apid);
        plan.prefix.push('.');
        push_name_part(&mut plan.prefix, ctid);
        self.values.clear();
        let ev = Event {
            time: a.time,
            extras: a.extras.clone(),
            ..Event::default()
        };
        let ecu = a.extras.get(X_ECU).is_some();
        let inst = if ecu { self.ecu(&ev) } else { PM_IN_NULL };
        self.extract_values(&plan, &a.text, ecu);
        self.sample(a.time, a.raw_clock, inst, &a.extras)
    }

    /// What follows `item` (definitions, then its sample), into `queue`.
    fn after(&mut self, item: &Item) {
        let s = match item {
            Item::EventType(t) => {
                self.define(t);
                None
            }
            Item::Event(e) if self.plans.contains_key(&e.type_id) => self.derive(e),
            Item::EventRun(r) if self.plans.contains_key(&r.event.type_id) => {
                let mut out = Vec::new();
                let _ = r.each_item(|it| {
                    if let Item::Event(e) = it {
                        if let Some(s) = self.derive(e) {
                            out.push(Item::Sample(s));
                        }
                    }
                    Ok::<(), ()>(())
                });
                self.queue.extend(out);
                None
            }
            Item::Annotation(a) => self.derive_annotation(a),
            _ => None,
        };
        if let Some(s) = s {
            self.queue.push_back(Item::Sample(s));
        }
    }

    /// At the end of the stream: what was left out, in the loss report.
    fn report(&mut self) {
        if std::mem::replace(&mut self.reported, true) {
            return;
        }
        let Some(loss) = &self.loss else { return };
        let mut l = loss.borrow_mut();
        l.drop_n(
            "derived values",
            "more than 10000 metrics derived from arguments and --extract: the rest left out",
            self.over_cap,
        );
        l.drop_n(
            "extracted values",
            "the --extract capture is not a number",
            self.not_numbers,
        );
        l.drop_n(
            "argument values",
            "an unsigned argument above 2^63-1 has no place in a 64-bit signed metric",
            self.big_unsigned,
        );
    }

    /// Is this one of our samples (given back to us, not to the reader)?
    fn ours(item: &Item) -> bool {
        matches!(item, Item::Sample(s)
            if s.metrics.first().is_some_and(|m| m.metric >> 22 == DERIVED_DOMAIN))
    }
}

impl TraceReader for Derive {
    fn next_item(&mut self) -> Result<Option<Item>> {
        if let Some(it) = self.queue.pop_front() {
            return Ok(Some(it));
        }
        match self.inner.next_item()? {
            Some(item) => {
                self.after(&item);
                Ok(Some(item))
            }
            None => {
                self.report();
                Ok(None)
            }
        }
    }

    /// The inner run, with each event's derived items right after it.
    fn next_batch(&mut self, out: &mut Vec<Item>, max: usize) -> Result<bool> {
        while let Some(it) = self.queue.pop_front() {
            out.push(it);
        }
        let start = out.len();
        let r = self.inner.next_batch(out, max);
        // Most runs give nothing: they stay where they are.
        let mut i = start;
        while i < out.len() {
            self.after(&out[i]);
            if !self.queue.is_empty() {
                break;
            }
            i += 1;
        }
        if i < out.len() {
            let mut rest = std::mem::take(&mut self.scratch);
            rest.extend(out.drain(i + 1..));
            out.extend(self.queue.drain(..));
            for item in rest.drain(..) {
                self.after(&item);
                out.push(item);
                out.extend(self.queue.drain(..));
            }
            self.scratch = rest;
        }
        // After the last run's values are counted.
        if matches!(r, Ok(false)) {
            self.report();
        }
        r
    }

    fn recycle(&mut self, item: Item) {
        if Self::ours(&item) {
            if let (Item::Sample(s), true) = (item, self.spare.len() < 64) {
                self.spare.push(s);
            }
        } else {
            self.inner.recycle(item);
        }
    }

    fn recycle_batch(&mut self, items: &mut Vec<Item>) {
        if items.iter().any(Self::ours) {
            for item in items.drain(..) {
                self.recycle(item);
            }
        } else {
            self.inner.recycle_batch(items);
        }
    }

    /// Runs are taken apart here only for types with something to derive
    /// (KPI datasets have none unless an `--extract` names them).
    fn event_runs(&mut self) -> bool {
        self.inner.event_runs()
    }

    pass_to_inner!(header, diagnostics, native_counts, progress, restarts);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_short_names_not_free_text() {
        assert_eq!(label("temp"), Some("temp"));
        assert_eq!(label(" CPU load: "), Some("CPU load"));
        assert_eq!(label("rx_bytes="), Some("rx_bytes"));
        assert_eq!(label("Hello world, this is a sentence."), None);
        assert_eq!(label("42"), None);
        assert_eq!(label(""), None);
        assert_eq!(label(":"), None);
        assert_eq!(label(&"x".repeat(33)), None);
    }

    #[test]
    fn positional_names_are_the_readers() {
        assert!(positional("arg0"));
        assert!(positional("arg12_12"));
        assert!(!positional("arg"));
        assert!(!positional("argument"));
        assert!(!positional("temp"));
    }

    #[test]
    fn name_parts_suit_pcp() {
        assert_eq!(pcp_name_part("LOG"), "LOG");
        assert_eq!(pcp_name_part("CPU load"), "CPU_load");
        assert_eq!(pcp_name_part("-"), "e_");
        assert_eq!(pcp_name_part("2nd"), "e2nd");
    }
}

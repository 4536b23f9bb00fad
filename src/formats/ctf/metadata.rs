//! The TSDL `metadata` file (plain text, CTF 1.8), written once every
//! event class is known (at finish).

use super::packet::{SC_CPU, SC_OTHER};
use super::types::{field_tsdl, ident, literal, CField};
use crate::model::{Header, TimeBase};
use std::collections::HashSet;
use std::fmt::Write as _;

/// Name of the clock class.
pub const CLOCK: &str = "polytrace";

/// One event class as declared in one stream class.
pub struct Declared<'a> {
    pub name: &'a str,
    pub id: u32,
    pub stream_id: u32,
    pub fields: &'a [CField],
}

pub fn uuid_text(u: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        write!(s, "{b:02x}").unwrap();
    }
    s
}

/// What the clock is, in words (the clock class `description`).
pub fn clock_description(h: &Header) -> String {
    let src = format!("{} {}", h.source, h.version);
    match &h.time_base {
        TimeBase::Absolute => format!(
            "nanoseconds since the Unix epoch, exact as the source ({src}) gives them"
        ),
        TimeBase::Relative { origin } => format!(
            "nanoseconds relative to {origin}; the source ({src}) has no absolute time, so the origin (0) is not a date"
        ),
        TimeBase::Cycles { hz, anchor } => {
            let mut s = format!("the source ({src}) has only a cycle counter");
            match hz {
                Some(hz) => write!(s, ", converted to nanoseconds at {hz} Hz").unwrap(),
                None => s.push_str(" of unknown rate: one cycle is shown as one nanosecond"),
            }
            match anchor {
                Some(a) => write!(s, ", placed after the anchor {a} given by the user").unwrap(),
                None => s.push_str("; the origin (0) is not a date"),
            }
            s
        }
    }
}

/// The whole metadata text.
pub fn write(
    h: &Header,
    uuid: &[u8; 16],
    raw_clock: Option<&str>,
    used_classes: [bool; 2],
    events: &[Declared],
) -> String {
    let mut o = String::with_capacity(4096 + events.len() * 256);
    o.push_str("/* CTF 1.8 */\n\n");
    o.push_str("/* Written by polytrace from a ");
    o.push_str(h.source.name());
    o.push_str(" trace; mapping in polytrace's docs/ctf.md. */\n\n");
    for (bits, signed, name) in [
        (8, false, "uint8_t"),
        (32, false, "uint32_t"),
        (64, false, "uint64_t"),
    ] {
        writeln!(
            o,
            "typealias integer {{ size = {bits}; align = 8; signed = {signed}; }} := {name};"
        )
        .unwrap();
    }
    writeln!(
        o,
        "\ntrace {{\n\tmajor = 1;\n\tminor = 8;\n\tuuid = \"{}\";\n\tbyte_order = le;\n\tpacket.header := struct {{\n\t\tuint32_t magic;\n\t\tuint8_t uuid[16];\n\t\tuint32_t stream_id;\n\t\tuint64_t stream_instance_id;\n\t}} align(8);\n}};\n",
        uuid_text(uuid)
    )
    .unwrap();

    // Environment: plain facts about the source, never a guess.
    o.push_str("env {\n");
    let mut used = HashSet::new();
    let mut env = |o: &mut String, k: &str, v: &str| {
        let id = ident(k, &mut used);
        writeln!(o, "\t{id} = {};", literal(v)).unwrap();
    };
    if let Some(host) = &h.host {
        env(&mut o, "hostname", host);
    }
    env(&mut o, "tracer_name", "polytrace");
    env(&mut o, "source_format", h.source.name());
    env(&mut o, "source_version", &h.version);
    env(&mut o, "time_base", &h.time_base.describe());
    if let Some(tz) = &h.timezone {
        env(&mut o, "timezone", tz);
    }
    if let Some(rc) = raw_clock {
        env(&mut o, "raw_clock", rc);
    }
    for (k, v) in &h.system {
        env(&mut o, &format!("system_{k}"), v);
    }
    o.push_str("};\n\n");

    let absolute = h.time_base.is_absolute();
    writeln!(
        o,
        "clock {{\n\tname = {CLOCK};\n\tuuid = \"{}\";\n\tdescription = {};\n\tfreq = 1000000000;\n\tprecision = 0;\n\toffset_s = 0;\n\toffset = 0;\n\tabsolute = {};\n}};\n",
        uuid_text(uuid),
        literal(&clock_description(h)),
        if absolute { "true" } else { "false" }
    )
    .unwrap();
    writeln!(
        o,
        "typealias integer {{ size = 64; align = 8; signed = false; map = clock.{CLOCK}.value; }} := uint64_clock_t;\n"
    )
    .unwrap();

    for (sc, used) in [SC_CPU, SC_OTHER].into_iter().zip(used_classes) {
        if !used {
            continue;
        }
        writeln!(
            o,
            "stream {{\n\tid = {sc};\n\tpacket.context := struct {{\n\t\tuint64_clock_t timestamp_begin;\n\t\tuint64_clock_t timestamp_end;\n\t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n\t\tuint64_t packet_seq_num;\n\t\tuint64_t events_discarded;{}\n\t}} align(8);\n\tevent.header := struct {{\n\t\tuint32_t id;\n\t\tuint64_clock_t timestamp;\n\t}} align(8);\n\tevent.context := struct {{\n\t\tuint8_t _raw_clock_length;\n\t\tuint64_t raw_clock[_raw_clock_length];\n\t}} align(8);\n}};\n",
            if sc == SC_CPU { "\n\t\tuint32_t cpu_id;" } else { "" }
        )
        .unwrap();
    }

    for e in events {
        writeln!(
            o,
            "event {{\n\tname = {};\n\tid = {};\n\tstream_id = {};",
            literal(e.name),
            e.id,
            e.stream_id
        )
        .unwrap();
        if e.fields.is_empty() {
            o.push_str("};\n\n");
            continue;
        }
        o.push_str("\tfields := struct {\n");
        for f in e.fields {
            field_tsdl(&mut o, f, 2);
        }
        o.push_str("\t} align(8);\n};\n\n");
    }
    o
}

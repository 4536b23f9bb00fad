//! What the verbs print on stderr about a run: diagnostics, loss.

use crate::error::{Diagnostic, Severity};

/// Print diagnostics; return whether any of them means data was lost.
pub fn report_diagnostics(diags: &[Diagnostic], quiet: bool) -> bool {
    let mut lossy = false;
    for d in diags {
        lossy |= d.severity == Severity::Salvaged;
        if !quiet || d.severity == Severity::Salvaged {
            eprintln!("polytrace: {d}");
        }
    }
    lossy
}

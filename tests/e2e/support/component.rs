//! What a component declares at its top level (not in the components and modules nested in it),
//! read with wasmparser: the names it imports and exports.

use wasmparser::Payload;

/// The names a component imports (`wasmrpc:tensor/types@0.1.0`, …).
pub fn imports(bytes: &[u8]) -> Vec<String> {
    top_level_names(bytes, |payload, names| {
        if let Payload::ComponentImportSection(s) = payload {
            names.extend(s.into_iter().map(|i| i.unwrap().name.0.to_owned()));
        }
    })
}

/// The names a component exports (`wasmrpc:tensor/method@0.1.0`, …).
pub fn exports(bytes: &[u8]) -> Vec<String> {
    top_level_names(bytes, |payload, names| {
        if let Payload::ComponentExportSection(s) = payload {
            names.extend(s.into_iter().map(|e| e.unwrap().name.0.to_owned()));
        }
    })
}

/// `collect` called on every payload of the outermost component, skipping nested ones.
fn top_level_names(bytes: &[u8], collect: impl Fn(Payload<'_>, &mut Vec<String>)) -> Vec<String> {
    let mut depth = 0usize;
    let mut names = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.expect("a valid component") {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            payload if depth == 0 => collect(payload, &mut names),
            _ => {}
        }
    }
    names
}

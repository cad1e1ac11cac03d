//! What a component declares it imports and exports, read from its bytes before compiling.
//!
//! The import rule is `runtime/imports.rs`'s, decided by name alone so it can be applied here:
//! WASI 0.2 and this project's packages, nothing else.
//!
//! Compiling a large component takes seconds and leaves an artifact behind; a component that
//! imports an interface no host provides, or does not export the method interface, would be
//! refused after all that work. Reading the top-level import and export sections takes
//! milliseconds, so such a component is refused before the compiler sees it, naming every
//! import it may not have. The types of the exported interface are checked after compiling
//! (wasmtime's own type check when the component is bound); bytes too malformed to read here
//! are left to the compiler to describe, in its own words.

use wasmparser::{ComponentExternalKind, Parser, Payload};

use super::imports;
use super::outputs::METHOD_INTERFACE;
use super::validate::UploadError;

/// Refuse a component whose top-level imports are not all on the allow-list (naming each one),
/// or that does not export the method interface as an instance.
pub fn check_declared(bytes: &[u8]) -> Result<(), UploadError> {
    let mut forbidden = Vec::new();
    let mut exports_method = false;
    // Nested core modules and components have imports of their own, satisfied inside the
    // component: only the outermost level's are asked of the host.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else {
            // Malformed: the compiler says where and why.
            return Ok(());
        };
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    let Ok(import) = import else {
                        return Ok(());
                    };
                    let name = import.name.0;
                    if !imports::is_allowed(name) && !forbidden.iter().any(|f| f == name) {
                        forbidden.push(name.to_owned());
                    }
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    let Ok(export) = export else {
                        return Ok(());
                    };
                    if export.name.0 == METHOD_INTERFACE
                        && export.kind == ComponentExternalKind::Instance
                    {
                        exports_method = true;
                    }
                }
            }
            _ => {}
        }
    }
    if !forbidden.is_empty() {
        return Err(UploadError::ForbiddenImports(forbidden));
    }
    if !exports_method {
        return Err(UploadError::WrongWorld(format!(
            "it exports no `{METHOD_INTERFACE}` instance; build it with the guest SDK \
             (`wasmrpc build`)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(wat: &str) -> Vec<u8> {
        wat::parse_str(wat).unwrap()
    }

    const EXPORTS_METHOD: &str =
        r#"(instance $m) (export "wasmrpc:tensor/method@0.1.0" (instance $m))"#;

    #[test]
    fn every_forbidden_top_level_import_is_named() {
        let bytes = component(&format!(
            r#"(component
                (import "wasi:io/streams@0.2.6" (instance))
                (import "evil:thing/steal" (instance))
                (import "wasi:sockets/tcp@0.2.0" (instance))
                (import "wasi:foo/bar@0.2.0" (instance))
                (import "wasi:cli/environment@0.3.0" (instance))
                (import "wasi:http/outgoing-handler@0.2.10" (instance))
                {EXPORTS_METHOD})"#
        ));
        match check_declared(&bytes) {
            Err(UploadError::ForbiddenImports(names)) => {
                assert_eq!(
                    names,
                    [
                        "evil:thing/steal",
                        "wasi:foo/bar@0.2.0",
                        "wasi:cli/environment@0.3.0"
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nested_imports_are_the_components_own_business() {
        let bytes = component(&format!(
            r#"(component
                (component (import "evil:inner/thing" (instance)))
                (core module (import "env" "f" (func)))
                {EXPORTS_METHOD})"#
        ));
        check_declared(&bytes).unwrap();
    }

    #[test]
    fn a_component_without_the_method_interface_is_of_another_world() {
        let err = check_declared(&component("(component)")).unwrap_err();
        assert!(matches!(err, UploadError::WrongWorld(_)), "{err:?}");
        assert!(err.to_string().contains(METHOD_INTERFACE), "{err}");
        // A nested export of that name is not the component's.
        let nested = component(&format!("(component (component {EXPORTS_METHOD}))"));
        assert!(check_declared(&nested).is_err());
    }

    #[test]
    fn malformed_bytes_are_left_to_the_compiler() {
        let mut bytes = component(&format!("(component {EXPORTS_METHOD})"));
        bytes.truncate(bytes.len() - 3);
        check_declared(&bytes).unwrap();
    }
}

//! Guests that misbehave while being instantiated, made from a real guest component.
//!
//! A Rust guest cannot easily have a core start function, so [`with_started_modules`] appends to
//! a built component extra core modules (written in WAT), each followed by a core instance of it
//! with no arguments. Instantiating the component then instantiates them too, after the guest's
//! own modules, which runs their start functions and allocates their memories: whatever they do
//! happens inside instantiation, before any export of the guest is called.

use wasmparser::{
    ComponentAlias, ComponentExternalKind, ComponentOuterAliasKind, ComponentTypeRef, Parser,
    Payload, Validator,
};

/// Component section id of a core module.
const CORE_MODULE_SECTION: u8 = 1;
/// Component section id of core instances.
const CORE_INSTANCE_SECTION: u8 = 2;

/// `component` with each of `modules` (WAT text) appended as a core module and instantiated with
/// no imports. Panics if a module does not assemble or the result is not a valid component, so a
/// test never uploads bytes that are refused for a reason other than the one it is about.
pub fn with_started_modules(component: &[u8], modules: &[&str]) -> Vec<u8> {
    let mut out = component.to_vec();
    // The appended modules take the next indices of the component's core module index space.
    for (index, text) in (core_module_count(component)..).zip(modules) {
        let module = wat::parse_str(text).unwrap_or_else(|e| panic!("assembling {text}: {e}"));
        push_section(&mut out, CORE_MODULE_SECTION, &module);
        // One instance: tag 0x00 (instantiate a module), the module's index, no arguments.
        let mut instances = Vec::new();
        leb128(1, &mut instances);
        instances.push(0x00);
        leb128(index, &mut instances);
        leb128(0, &mut instances);
        push_section(&mut out, CORE_INSTANCE_SECTION, &instances);
    }
    Validator::new()
        .validate_all(&out)
        .unwrap_or_else(|e| panic!("the composed component is invalid: {e}"));
    out
}

/// The size of the component's core module index space: the next module defined gets this index.
/// Counts the top-level component only (a nested component has an index space of its own).
fn core_module_count(component: &[u8]) -> u32 {
    let mut depth = 0;
    let mut count = 0;
    for payload in Parser::new(0).parse_all(component) {
        let payload = payload.expect("the base component parses");
        match payload {
            Payload::Version { .. } => depth += 1,
            Payload::End(_) => depth -= 1,
            _ if depth != 1 => {}
            Payload::ModuleSection { .. } => count += 1,
            Payload::ComponentImportSection(imports) => {
                for import in imports {
                    if matches!(import.unwrap().ty, ComponentTypeRef::Module(_)) {
                        count += 1;
                    }
                }
            }
            Payload::ComponentExportSection(exports) => {
                for export in exports {
                    if export.unwrap().kind == ComponentExternalKind::Module {
                        count += 1;
                    }
                }
            }
            Payload::ComponentAliasSection(aliases) => {
                for alias in aliases {
                    if matches!(
                        alias.unwrap(),
                        ComponentAlias::InstanceExport {
                            kind: ComponentExternalKind::Module,
                            ..
                        } | ComponentAlias::Outer {
                            kind: ComponentOuterAliasKind::CoreModule,
                            ..
                        }
                    ) {
                        count += 1;
                    }
                }
            }
            _ => {}
        }
    }
    count
}

/// `component` made distinct by a custom section carrying `n`: a component custom section is id 0,
/// then a name and a payload, so the digest changes and the component stays valid.
pub fn with_custom_section(component: &[u8], n: usize) -> Vec<u8> {
    let name = b"wasmrpc-e2e";
    let mut content = Vec::new();
    leb128(name.len() as u32, &mut content);
    content.extend_from_slice(name);
    content.extend_from_slice(n.to_string().as_bytes());
    let mut out = component.to_vec();
    push_section(&mut out, 0, &content);
    out
}

fn push_section(out: &mut Vec<u8>, id: u8, content: &[u8]) {
    out.push(id);
    leb128(content.len() as u32, out);
    out.extend_from_slice(content);
}

fn leb128(mut v: u32, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

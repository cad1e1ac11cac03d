//! Components written by hand, returning exactly the canonical-ABI bytes a test wants.
//!
//! A core module in WAT whose `signatures` and `call` exports return pointers into a memory
//! image laid out here, byte by byte, made a component by `wit-component` against the real
//! `wasmrpc:tensor` world (`wit/tensor.wit`). A test can so return what no toolchain would: a
//! string outside memory, an enum case past the last, a list misaligned for its elements, bytes
//! that are not UTF-8. Without a flaw the component is a valid one-method function (the control
//! that shows the rest of each fixture is sound).

use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};

use super::guests::workspace_root;

/// Where the image is written in the module's one page of memory.
const IMAGE_AT: u32 = 1024;
/// Where `cabi_realloc` starts handing out memory for the arguments the host lowers.
const HEAP_AT: u32 = 32 * 1024;
/// One past the last case of the `dtype` enum (`bool` … `bytes`: 14 cases).
const DTYPE_PAST_THE_LAST: u8 = 14;
/// `dtype` `f32`.
const DTYPE_F32: u8 = 11;
/// A pointer far past the end of a one-page memory.
const OUT_OF_BOUNDS: u32 = 0xffff_0000;

/// What is wrong with the value `signatures()` returns.
#[derive(Clone, Copy, Debug)]
pub enum SignaturesFlaw {
    /// The method's name points past the end of memory.
    NameOutOfBounds,
    /// The method's name is not UTF-8 (`\xff\xfe`).
    NameNotUtf8,
    /// The input's dtype is 14, one past the last case of the enum.
    DtypeOutOfRange,
    /// The input's shape is `option` case 2 (there are `none`, 0, and `some`, 1).
    ShapeOptionOutOfRange,
    /// The input's shape, a list of 8-aligned `option<u64>`, starts 4 bytes off.
    ShapeListMisaligned,
    /// The return area itself (the list's pointer and length) lies past the end of memory.
    ReturnAreaOutOfBounds,
    /// The return area itself starts one byte off its 4-byte alignment.
    ReturnAreaMisaligned,
}

/// What `call` returns.
#[derive(Clone, Copy, Debug)]
pub enum CallReturns {
    /// `ok([y])`, `y` the float32 tensor `[1.5, 2.5]`.
    Outputs,
    /// `ok([y])` whose data points past the end of memory.
    DataOutOfBounds,
    /// The return area itself lies past the end of memory.
    ReturnAreaOutOfBounds,
}

/// A component with one method, `name`, taking `x: float32[2]` and returning `y: float32[2]`,
/// whose `signatures()` returns that spoilt by `flaw`, and whose `call` returns `call`.
pub fn component(name: &str, flaw: Option<SignaturesFlaw>, call: CallReturns) -> Vec<u8> {
    let mut image = Image::default();
    let signatures = signatures_value(&mut image, name, flaw);
    let call = call_value(&mut image, call);
    let module = module(&image, signatures, call);
    componentize(module)
}

/// The image of the value `signatures()` returns; the address of its return area.
fn signatures_value(image: &mut Image, name: &str, flaw: Option<SignaturesFlaw>) -> u32 {
    use SignaturesFlaw::*;
    let (name_ptr, name_len) = match flaw {
        Some(NameOutOfBounds) => (OUT_OF_BOUNDS, 16),
        Some(NameNotUtf8) => image.string(b"\xff\xfe"),
        _ => image.string(name.as_bytes()),
    };
    let input = spec(
        image,
        "x",
        match flaw {
            Some(DtypeOutOfRange) => DTYPE_PAST_THE_LAST,
            _ => DTYPE_F32,
        },
        flaw,
    );
    let output = spec(image, "y", DTYPE_F32, None);
    let doc = image.string(b"hand made");
    // method-signature: name, inputs, outputs, doc: four pointer pairs (32 bytes, align 4).
    let mut method = Vec::new();
    for (ptr, len) in [(name_ptr, name_len), (input, 1), (output, 1), doc] {
        method.extend(ptr.to_le_bytes());
        method.extend(len.to_le_bytes());
    }
    let methods = image.place(4, &method);
    // The return area: the list's pointer and length.
    let area = image.place(4, &pair(methods, 1));
    match flaw {
        Some(ReturnAreaOutOfBounds) => OUT_OF_BOUNDS,
        Some(ReturnAreaMisaligned) => area + 1,
        _ => area,
    }
}

/// A one-element list of `tensor-spec` with shape `some([some(2)])`; its address.
fn spec(image: &mut Image, name: &str, dtype: u8, flaw: Option<SignaturesFlaw>) -> u32 {
    // option<u64>: discriminant, 7 bytes of padding, the u64 (16 bytes, align 8).
    let mut dim = vec![1, 0, 0, 0, 0, 0, 0, 0];
    dim.extend(2u64.to_le_bytes());
    let dims = match flaw {
        Some(SignaturesFlaw::ShapeListMisaligned) => image.place(8, &[0; 4]) + 4,
        _ => image.place(8, &[]),
    };
    image.place_at(dims, &dim);
    let (name_ptr, name_len) = image.string(name.as_bytes());
    let shape_case = match flaw {
        Some(SignaturesFlaw::ShapeOptionOutOfRange) => 2,
        _ => 1,
    };
    // tensor-spec (24 bytes, align 4): name at 0, dtype at 8, the shape option's discriminant
    // at 12 and its list at 16.
    let mut spec = Vec::new();
    spec.extend(pair(name_ptr, name_len));
    spec.extend([dtype, 0, 0, 0, shape_case, 0, 0, 0]);
    spec.extend(pair(dims, 1));
    image.place(4, &spec)
}

/// The image of the value `call` returns; the address of its return area.
fn call_value(image: &mut Image, returns: CallReturns) -> u32 {
    let shape = image.place(8, &2u64.to_le_bytes());
    let data = match returns {
        CallReturns::Outputs => {
            let values: Vec<u8> = [1.5f32, 2.5].iter().flat_map(|v| v.to_le_bytes()).collect();
            image.place(4, &values)
        }
        CallReturns::DataOutOfBounds | CallReturns::ReturnAreaOutOfBounds => OUT_OF_BOUNDS,
    };
    // tensor (20 bytes, align 4): dtype at 0, shape at 4, data at 12.
    let mut tensor = vec![DTYPE_F32, 0, 0, 0];
    tensor.extend(pair(shape, 1));
    tensor.extend(pair(data, 8));
    let tensors = image.place(4, &tensor);
    // result<list<tensor>, error> (16 bytes, align 4): case 0 (`ok`), its list at 4.
    let mut result = vec![0, 0, 0, 0];
    result.extend(pair(tensors, 1));
    result.extend([0; 4]);
    let area = image.place(4, &result);
    match returns {
        CallReturns::ReturnAreaOutOfBounds => OUT_OF_BOUNDS,
        _ => area,
    }
}

fn pair(ptr: u32, len: u32) -> Vec<u8> {
    let mut bytes = ptr.to_le_bytes().to_vec();
    bytes.extend(len.to_le_bytes());
    bytes
}

/// A memory image being laid out from [`IMAGE_AT`] on.
#[derive(Default)]
struct Image {
    bytes: Vec<u8>,
}

impl Image {
    /// `bytes` at the next address aligned to `align`; that address.
    fn place(&mut self, align: u32, bytes: &[u8]) -> u32 {
        while !(IMAGE_AT as usize + self.bytes.len()).is_multiple_of(align as usize) {
            self.bytes.push(0);
        }
        let at = IMAGE_AT + self.bytes.len() as u32;
        self.bytes.extend(bytes);
        at
    }

    /// `bytes` at `at`, which may lie past what is placed so far.
    fn place_at(&mut self, at: u32, bytes: &[u8]) {
        let start = (at - IMAGE_AT) as usize;
        if self.bytes.len() < start + bytes.len() {
            self.bytes.resize(start + bytes.len(), 0);
        }
        self.bytes[start..][..bytes.len()].copy_from_slice(bytes);
    }

    /// A string's bytes; its pointer and length.
    fn string(&mut self, s: &[u8]) -> (u32, u32) {
        (self.place(1, s), s.len() as u32)
    }
}

/// The core module: one page of memory holding `image`, a bump `cabi_realloc` for the arguments,
/// and the two exports returning the addresses of their return areas.
fn module(image: &Image, signatures: u32, call: u32) -> Vec<u8> {
    assert!(IMAGE_AT as usize + image.bytes.len() < HEAP_AT as usize);
    let data: String = image.bytes.iter().map(|b| format!("\\{b:02x}")).collect();
    let text = format!(
        r#"(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const {HEAP_AT}))
  (func (export "cabi_realloc") (param i32 i32) (param $align i32) (param $size i32) (result i32)
    (local $at i32)
    (local.set $at
      (i32.and
        (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $at) (local.get $size)))
    (local.get $at))
  (func (export "wasmrpc:tensor/method@0.1.0#signatures") (result i32)
    (i32.const {signatures}))
  (func (export "wasmrpc:tensor/method@0.1.0#call") (param i32 i32 i32 i32) (result i32)
    (i32.const {call}))
  (data (i32.const {IMAGE_AT}) "{data}"))"#
    );
    wat::parse_str(&text).unwrap_or_else(|e| panic!("assembling {text}: {e}"))
}

/// `module` with the `tensor-function` world embedded, made a component.
fn componentize(mut module: Vec<u8>) -> Vec<u8> {
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve
        .push_file(workspace_root().join("wit/tensor.wit"))
        .expect("parsing wit/tensor.wit");
    let world = resolve
        .select_world(&[package], Some("tensor-function"))
        .expect("the tensor-function world");
    embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)
        .expect("embedding the world");
    ComponentEncoder::default()
        .module(&module)
        .expect("reading the module's world")
        .validate(true)
        .encode()
        .expect("making the component")
}

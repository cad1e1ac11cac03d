//! Method signatures and registration metadata, as the HTTP API shows them.

use crate::dtype::DType;
use crate::tensor::Tensor;

/// One dimension of a [`TensorSpec`]: fixed, or dynamic (any size).
///
/// In JSON a dynamic dimension is `-1`, as in KServe model metadata.
///
/// ```
/// use wasmrpc_proto::Dim;
/// let dims: Vec<Dim> = serde_json::from_str("[-1, 3]").unwrap();
/// assert_eq!(dims, vec![Dim::Dynamic, Dim::Fixed(3)]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dim {
    /// Exactly this size.
    Fixed(u64),
    /// Any size.
    Dynamic,
}

impl serde::Serialize for Dim {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Dim::Fixed(n) => s.serialize_u64(*n),
            Dim::Dynamic => s.serialize_i64(-1),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Dim {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Option::<i64>::deserialize(d)?;
        Ok(match v {
            Some(n) if n >= 0 => Dim::Fixed(n as u64),
            _ => Dim::Dynamic,
        })
    }
}

/// The declared type of one input or output: name, dtype and shape.
///
/// ```
/// use wasmrpc_proto::{DType, Dim, TensorSpec};
/// // TF: tf.TensorSpec(shape=[None, 3], dtype=tf.float32, name="x")
/// let spec = TensorSpec { name: "x".into(), dtype: DType::Float32,
///                         shape: Some(vec![Dim::Dynamic, Dim::Fixed(3)]) };
/// assert_eq!(spec.shape_text(), "[?, 3]");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TensorSpec {
    /// The argument's or output's name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Dimensions, or `None` for any rank. `Some(vec![])` accepts only scalars.
    pub shape: Option<Vec<Dim>>,
}

impl TensorSpec {
    /// Why `tensor` does not fit this spec, or `None` if it does.
    ///
    /// ```
    /// use wasmrpc_proto::{DType, Dim, Tensor, TensorSpec};
    /// let spec = TensorSpec { name: "a".into(), dtype: DType::Float32,
    ///                         shape: Some(vec![Dim::Dynamic, Dim::Fixed(3)]) };
    /// assert!(spec.mismatch(&Tensor::from_vec([5, 3], vec![0f32; 15]).unwrap()).is_none());
    /// assert!(spec.mismatch(&Tensor::from_vec([3, 5], vec![0f32; 15]).unwrap()).is_some());
    /// ```
    pub fn mismatch(&self, tensor: &Tensor) -> Option<String> {
        if tensor.dtype() != self.dtype {
            return Some(format!("expected {}, got {}", self.dtype, tensor.dtype()));
        }
        let dims = self.shape.as_ref()?;
        let shape = tensor.shape();
        let fits = dims.len() == shape.len()
            && dims
                .iter()
                .zip(shape)
                .all(|(d, &n)| matches!(d, Dim::Dynamic) || *d == Dim::Fixed(n));
        (!fits).then(|| {
            format!(
                "expected shape {}, got {}",
                self.shape_text(),
                crate::tensor::ShortShape(shape)
            )
        })
    }

    /// The shape as text, `?` for a dynamic dimension: `[?, 3]`, or `any` for any rank.
    ///
    /// ```
    /// use wasmrpc_proto::{DType, TensorSpec};
    /// let any = TensorSpec { name: "x".into(), dtype: DType::Int32, shape: None };
    /// assert_eq!(any.shape_text(), "any");
    /// ```
    pub fn shape_text(&self) -> String {
        match &self.shape {
            None => "any".into(),
            Some(dims) => {
                let parts: Vec<String> = dims
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(n) => n.to_string(),
                        Dim::Dynamic => "?".into(),
                    })
                    .collect();
                format!("[{}]", parts.join(", "))
            }
        }
    }
}

/// What a method takes and returns.
///
/// ```
/// use wasmrpc_proto::{DType, MethodSignature, Tensor, TensorSpec};
/// let int32 = |name: &str| TensorSpec { name: name.into(), dtype: DType::Int32, shape: None };
/// let sig = MethodSignature { name: "add".into(), inputs: vec![int32("a"), int32("b")],
///                             outputs: vec![int32("sum")], doc: String::new() };
/// assert!(sig.check_args(&[Tensor::scalar(2i32), Tensor::scalar(3i32)]).is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MethodSignature {
    /// The method's name inside its component.
    pub name: String,
    /// One spec per positional argument.
    pub inputs: Vec<TensorSpec>,
    /// One spec per output.
    pub outputs: Vec<TensorSpec>,
    /// Documentation from the function's author.
    #[serde(default)]
    pub doc: String,
}

impl MethodSignature {
    /// Check positional arguments against the inputs: arity, dtype, shape.
    ///
    /// # Errors
    /// A message naming the first argument that does not fit.
    ///
    /// ```
    /// use wasmrpc_proto::{DType, MethodSignature, Tensor, TensorSpec};
    /// let int32 = |name: &str| TensorSpec { name: name.into(), dtype: DType::Int32, shape: None };
    /// let sig = MethodSignature { name: "add".into(), inputs: vec![int32("a"), int32("b")],
    ///                             outputs: vec![int32("sum")], doc: String::new() };
    /// let why = sig.check_args(&[Tensor::scalar(2i32), Tensor::scalar(3f32)]).unwrap_err();
    /// assert_eq!(why, "argument 1 (`b`): expected int32, got float32");
    /// assert!(sig.check_args(&[Tensor::scalar(2i32)]).unwrap_err().contains("takes 2 argument(s)"));
    /// ```
    pub fn check_args(&self, args: &[Tensor]) -> Result<(), String> {
        if args.len() != self.inputs.len() {
            let names: Vec<&str> = self.inputs.iter().map(|s| s.name.as_str()).collect();
            return Err(format!(
                "method `{}` takes {} argument(s) ({}), got {}",
                self.name,
                self.inputs.len(),
                names.join(", "),
                args.len()
            ));
        }
        for (i, (spec, arg)) in self.inputs.iter().zip(args).enumerate() {
            if let Some(why) = spec.mismatch(arg) {
                return Err(format!("argument {i} (`{}`): {why}", spec.name));
            }
        }
        Ok(())
    }
}

/// A registered method as the server describes it: the signature plus registration metadata.
///
/// ```
/// let info: wasmrpc_proto::MethodInfo = serde_json::from_str(r#"{
///     "name": "addition", "version": 2, "versions": [1, 2], "digest": "sha256:00", "size": 9,
///     "created_ms": 1795330178138, "export": "add",
///     "signature": {"name": "add", "inputs": [], "outputs": [], "doc": ""}}"#).unwrap();
/// println!("{} v{} of {:?}, {} bytes, {}", info.name, info.version, info.versions, info.size, info.digest);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MethodInfo {
    /// The name it was registered under.
    pub name: String,
    /// The version this entry describes (the newest, in listings).
    pub version: u32,
    /// Every version still registered, oldest first.
    #[serde(default)]
    pub versions: Vec<u32>,
    /// Content digest of the component, `sha256:<hex>`.
    pub digest: String,
    /// Component size in bytes.
    pub size: u64,
    /// When this version was registered, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The method inside the component that this name calls.
    pub export: String,
    /// What it takes and returns.
    pub signature: MethodSignature,
}

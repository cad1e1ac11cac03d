//! Tensor element types, named as TensorFlow names them.

use std::fmt;
use std::str::FromStr;

/// The element type of a tensor: every fixed-size KServe v2 datatype plus variable-length strings.
///
/// ```
/// use wasmrpc_proto::DType;
/// let d: DType = "float32".parse().unwrap();
/// assert_eq!((d.name(), d.kserve_name(), d.size()), ("float32", "FP32", Some(4)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// One byte per element, 0 or 1.
    Bool,
    /// Unsigned 8-bit integer.
    UInt8,
    /// Unsigned 16-bit integer.
    UInt16,
    /// Unsigned 32-bit integer.
    UInt32,
    /// Unsigned 64-bit integer.
    UInt64,
    /// Signed 8-bit integer.
    Int8,
    /// Signed 16-bit integer.
    Int16,
    /// Signed 32-bit integer.
    Int32,
    /// Signed 64-bit integer.
    Int64,
    /// IEEE 754 half precision.
    Float16,
    /// bfloat16.
    BFloat16,
    /// IEEE 754 single precision.
    Float32,
    /// IEEE 754 double precision.
    Float64,
    /// Variable-length byte strings (TensorFlow's `tf.string`, KServe's `BYTES`).
    String,
}

impl DType {
    /// Every dtype.
    ///
    /// ```
    /// assert_eq!(wasmrpc_proto::DType::ALL.len(), 14);
    /// ```
    pub const ALL: [DType; 14] = [
        DType::Bool,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
        DType::String,
    ];

    /// TensorFlow's name, used in JSON: `"int32"`, `"float32"`, `"string"`…
    ///
    /// ```
    /// assert_eq!(wasmrpc_proto::DType::BFloat16.name(), "bfloat16");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::String => "string",
        }
    }

    /// The KServe v2 datatype name: `"INT32"`, `"FP32"`, `"BYTES"`…
    ///
    /// ```
    /// assert_eq!(wasmrpc_proto::DType::String.kserve_name(), "BYTES");
    /// ```
    pub fn kserve_name(self) -> &'static str {
        match self {
            DType::Bool => "BOOL",
            DType::UInt8 => "UINT8",
            DType::UInt16 => "UINT16",
            DType::UInt32 => "UINT32",
            DType::UInt64 => "UINT64",
            DType::Int8 => "INT8",
            DType::Int16 => "INT16",
            DType::Int32 => "INT32",
            DType::Int64 => "INT64",
            DType::Float16 => "FP16",
            DType::BFloat16 => "BF16",
            DType::Float32 => "FP32",
            DType::Float64 => "FP64",
            DType::String => "BYTES",
        }
    }

    /// Parse a KServe v2 datatype name.
    ///
    /// ```
    /// use wasmrpc_proto::DType;
    /// assert_eq!(DType::from_kserve_name("INT32"), Some(DType::Int32));
    /// assert_eq!(DType::from_kserve_name("int32"), None);
    /// ```
    pub fn from_kserve_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.kserve_name() == name)
    }

    /// Bytes per element, or `None` for variable-length strings.
    ///
    /// ```
    /// use wasmrpc_proto::DType;
    /// assert_eq!(DType::Float16.size(), Some(2));
    /// assert_eq!(DType::String.size(), None);
    /// ```
    pub fn size(self) -> Option<usize> {
        match self {
            DType::Bool | DType::UInt8 | DType::Int8 => Some(1),
            DType::UInt16 | DType::Int16 | DType::Float16 | DType::BFloat16 => Some(2),
            DType::UInt32 | DType::Int32 | DType::Float32 => Some(4),
            DType::UInt64 | DType::Int64 | DType::Float64 => Some(8),
            DType::String => None,
        }
    }

    /// Whether the dtype is a floating-point type.
    ///
    /// ```
    /// use wasmrpc_proto::DType;
    /// assert!(DType::BFloat16.is_float());
    /// assert!(!DType::Int8.is_float());
    /// ```
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The text was not a dtype name.
///
/// ```
/// let err = "int33".parse::<wasmrpc_proto::DType>().unwrap_err();
/// assert!(err.to_string().starts_with("unknown dtype `int33`"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown dtype `{0}`; expected one of bool, uint8, uint16, uint32, uint64, int8, int16, int32, int64, float16, bfloat16, float32, float64, string"
)]
pub struct UnknownDType(pub String);

impl FromStr for DType {
    type Err = UnknownDType;

    /// Accepts TensorFlow names and, for convenience, a few common aliases (`i32`, `f32`, `bytes`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(d) = DType::ALL.into_iter().find(|d| d.name() == s) {
            return Ok(d);
        }
        let alias = match s {
            "u8" => DType::UInt8,
            "u16" => DType::UInt16,
            "u32" => DType::UInt32,
            "u64" => DType::UInt64,
            "i8" => DType::Int8,
            "i16" => DType::Int16,
            "i32" => DType::Int32,
            "i64" => DType::Int64,
            "f16" | "half" => DType::Float16,
            "bf16" => DType::BFloat16,
            "f32" | "float" => DType::Float32,
            "f64" | "double" => DType::Float64,
            "bytes" | "str" => DType::String,
            _ => return Err(UnknownDType(s.to_owned())),
        };
        Ok(alias)
    }
}

impl serde::Serialize for DType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for DType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

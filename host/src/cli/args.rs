//! The short argument form of `wasmrpc call`: `dtype:values`, the shape read off the nesting.

use anyhow::{Context as _, bail};
use serde_json::Value;
use wasmrpc_proto::{DType, Tensor};

/// Parse one command-line argument: `dtype:values` or a JSON tensor object.
pub fn parse_arg(text: &str) -> anyhow::Result<Tensor> {
    let text = text.trim();
    if text.starts_with('{') {
        return Tensor::from_json(text).map_err(|e| anyhow::anyhow!("{e}"));
    }
    let (dtype, values) = text
        .split_once(':')
        .context("expected `dtype:values` (like `int32:[1,2]`) or a JSON tensor")?;
    let dtype: DType = dtype.trim().parse()?;
    let values: Value =
        serde_json::from_str(values).with_context(|| format!("`{values}` is not JSON"))?;
    let shape = shape_of(&values)?;
    let tensor = serde_json::json!({ "dtype": dtype, "shape": shape, "data": values });
    Tensor::from_json(&tensor.to_string()).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The shape of nested arrays; every level must be rectangular.
fn shape_of(v: &Value) -> anyhow::Result<Vec<u64>> {
    match v {
        Value::Array(items) => {
            let inner = match items.first() {
                Some(first) => shape_of(first)?,
                None => Vec::new(),
            };
            for item in items {
                if shape_of(item)? != inner {
                    bail!("ragged nesting: every row must have the same shape");
                }
            }
            let mut shape = vec![items.len() as u64];
            shape.extend(inner);
            Ok(shape)
        }
        _ => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_forms_infer_the_shape() {
        let t = parse_arg("int32:[2,3]").unwrap();
        assert_eq!(t.shape(), &[2]);
        assert_eq!(t.to_vec::<i32>().unwrap(), vec![2, 3]);
        let m = parse_arg("float32:[[1,2],[3,4],[5,6]]").unwrap();
        assert_eq!(m.shape(), &[3, 2]);
        assert_eq!(parse_arg("f64:2.5").unwrap().shape(), &[] as &[u64]);
        assert_eq!(parse_arg(r#"string:["a","b"]"#).unwrap().num_elements(), 2);
        let j = parse_arg(r#"{"dtype":"int8","shape":[1],"data":[1]}"#).unwrap();
        assert_eq!(j.to_vec::<i8>().unwrap(), vec![1]);
    }

    #[test]
    fn bad_short_forms_say_why() {
        assert!(
            parse_arg("int32:[[1],[2,3]]")
                .unwrap_err()
                .to_string()
                .contains("ragged")
        );
        assert!(parse_arg("int33:[1]").is_err());
        assert!(
            parse_arg("int8:[300]")
                .unwrap_err()
                .to_string()
                .contains("300")
        );
        assert!(parse_arg("[1,2]").is_err());
    }
}

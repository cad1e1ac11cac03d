//! Tensors between Python and the wire. Python hands over `(dtype, shape, data)` triples, where
//! `data` is a buffer of the little-endian bytes (numpy's own layout on this machine) or, for
//! strings, a list of `bytes`; outputs come back the same way, their bytes in a
//! [`TensorBuffer`] that numpy reads in place (`numpy.frombuffer`), without a copy.

use std::ffi::c_int;
use std::os::raw::c_void;

use bytes::Bytes;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use wasmrpc_client::{DType, Dim, Tensor, TensorSpec};

use crate::errors::invalid_argument;

/// The bytes of one output tensor, shared with the response they arrived in. Read-only: numpy
/// views over it are not writeable (`numpy.array(x)` makes a writeable copy).
#[pyclass(frozen, module = "wasmrpc._native")]
pub(crate) struct TensorBuffer {
    bytes: Bytes,
}

#[pymethods]
impl TensorBuffer {
    /// The buffer protocol: a read-only, one-dimensional view of the bytes.
    ///
    /// # Safety
    /// Called by Python with a valid `view`; the bytes live as long as `slf`, which
    /// `PyBuffer_FillInfo` keeps alive through `view.obj`.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no view to fill"));
        }
        let bytes = &slf.get().bytes;
        let len = ffi::Py_ssize_t::try_from(bytes.len())
            .map_err(|_| PyBufferError::new_err("tensor too large for a buffer"))?;
        // SAFETY: `view` is valid (checked above) and the data outlives the view, which holds a
        // reference to `slf`; read-only (1), so Python never writes through the pointer.
        let status = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                bytes.as_ptr() as *mut c_void,
                len,
                1,
                flags,
            )
        };
        if status == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}

    fn __len__(&self) -> usize {
        self.bytes.len()
    }
}

fn parse_dtype(py: Python<'_>, name: &str) -> PyResult<DType> {
    name.parse::<DType>()
        .map_err(|_| invalid_argument(py, format!("unknown dtype `{name}`")))
}

/// Buffers from this size up are copied with the GIL released, so other Python threads run
/// meanwhile (a 64 MiB copy takes tens of milliseconds).
const COPY_WITHOUT_GIL: usize = 1 << 20;

/// The bytes of a buffer (a numpy array's), copied once.
fn copy_buffer(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let buffer = PyBuffer::<u8>::get(data)?;
    let len = buffer.len_bytes();
    if len < COPY_WITHOUT_GIL || !buffer.is_c_contiguous() {
        return buffer.to_vec(py);
    }
    let address = buffer.buf_ptr() as usize;
    // SAFETY: `buffer` holds the exporter's buffer (so its memory stays allocated) until it
    // drops after the copy; the memory is `len` contiguous bytes, only read. A Python thread
    // writing into the array meanwhile would tear the copy, as it would numpy's own copies.
    let bytes =
        py.detach(|| unsafe { std::slice::from_raw_parts(address as *const u8, len) }.to_vec());
    drop(buffer);
    Ok(bytes)
}

/// One argument: `(dtype, shape, data)`.
fn tensor_from_py(py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let (dtype, shape, data): (String, Vec<u64>, Bound<'_, PyAny>) = item.extract()?;
    let dtype = parse_dtype(py, &dtype)?;
    let tensor = if dtype == DType::String {
        let list = data.cast::<PyList>()?;
        let items: Vec<Bound<'_, PyBytes>> = list
            .iter()
            .map(|b| b.cast_into::<PyBytes>().map_err(PyErr::from))
            .collect::<PyResult<_>>()?;
        Tensor::from_strings(shape, items.iter().map(|b| b.as_bytes()))
    } else {
        Tensor::from_raw(dtype, shape, copy_buffer(py, &data)?)
    };
    tensor.map_err(|e| invalid_argument(py, e.to_string()))
}

/// The arguments of a call, in order.
pub(crate) fn tensors_from_py(py: Python<'_>, args: &Bound<'_, PyList>) -> PyResult<Vec<Tensor>> {
    args.iter().map(|a| tensor_from_py(py, &a)).collect()
}

/// One output spec from Python: `(dtype, shape or None)`, a dimension of `None` or -1 being
/// dynamic.
pub(crate) type PySpec = (String, Option<Vec<Option<i64>>>);

/// Output specs from Python, as [`TensorSpec`]s.
pub(crate) fn specs_from_py(
    py: Python<'_>,
    specs: Option<Vec<PySpec>>,
) -> PyResult<Option<Vec<TensorSpec>>> {
    let Some(specs) = specs else {
        return Ok(None);
    };
    specs
        .into_iter()
        .enumerate()
        .map(|(i, (dtype, shape))| {
            Ok(TensorSpec {
                name: format!("output_{i}"),
                dtype: parse_dtype(py, &dtype)?,
                shape: shape.map(|dims| {
                    dims.into_iter()
                        .map(|d| match d {
                            Some(n) if n >= 0 => Dim::Fixed(n as u64),
                            _ => Dim::Dynamic,
                        })
                        .collect()
                }),
            })
        })
        .collect::<PyResult<Vec<_>>>()
        .map(Some)
}

/// Outputs as a list of `(dtype, shape, data)`: `data` a [`TensorBuffer`], or a list of `bytes`
/// for strings.
pub(crate) fn tensors_to_py<'py>(
    py: Python<'py>,
    tensors: &[Tensor],
) -> PyResult<Bound<'py, PyList>> {
    let items = tensors
        .iter()
        .map(|t| -> PyResult<Bound<'py, PyTuple>> {
            let data: Bound<'py, PyAny> = if t.dtype() == DType::String {
                let strings = t
                    .to_strings()
                    .map_err(|e| invalid_argument(py, e.to_string()))?;
                PyList::new(py, strings.iter().map(|s| PyBytes::new(py, s)))?.into_any()
            } else {
                Bound::new(
                    py,
                    TensorBuffer {
                        bytes: t.raw_bytes().clone(),
                    },
                )?
                .into_any()
            };
            PyTuple::new(
                py,
                [
                    t.dtype().name().into_pyobject(py)?.into_any(),
                    PyList::new(py, t.shape())?.into_any(),
                    data,
                ],
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

//! The gRPC forms of the protocol's other answers, from the same types the HTTP routes answer
//! with: server and model metadata, the Triton model configuration, statistics and the
//! repository index. One source for both transports, so they cannot say different things.

use super::model_metadata_response::TensorMetadata;
use super::repository_index_response::ModelIndex;
use super::{
    DataType, ModelConfig, ModelInput, ModelMetadataResponse, ModelOutput, ModelStatistics,
    ServerMetadataResponse, StatisticDuration,
};
use crate::kserve::{self, MetadataTensor};
use crate::kserve_repository::{self, RepositoryIndexEntry};

impl From<kserve::ServerMetadata> for ServerMetadataResponse {
    fn from(m: kserve::ServerMetadata) -> Self {
        ServerMetadataResponse {
            name: m.name,
            version: m.version,
            extensions: m.extensions,
        }
    }
}

impl From<MetadataTensor> for TensorMetadata {
    fn from(t: MetadataTensor) -> Self {
        TensorMetadata {
            name: t.name,
            datatype: t.datatype,
            shape: t.shape,
        }
    }
}

impl From<kserve::ModelMetadata> for ModelMetadataResponse {
    fn from(m: kserve::ModelMetadata) -> Self {
        ModelMetadataResponse {
            name: m.name,
            versions: m.versions,
            platform: m.platform,
            inputs: m.inputs.into_iter().map(Into::into).collect(),
            outputs: m.outputs.into_iter().map(Into::into).collect(),
        }
    }
}

/// Triton's enumeration value of a config datatype name (`TYPE_FP32`).
fn data_type(name: &str) -> i32 {
    DataType::from_str_name(name).unwrap_or(DataType::TypeInvalid) as i32
}

impl From<kserve::ModelConfig> for ModelConfig {
    fn from(c: kserve::ModelConfig) -> Self {
        ModelConfig {
            name: c.name,
            platform: c.platform,
            max_batch_size: i32::try_from(c.max_batch_size).unwrap_or(i32::MAX),
            input: c
                .input
                .into_iter()
                .map(|t| ModelInput {
                    data_type: data_type(&t.data_type),
                    name: t.name,
                    dims: t.dims,
                })
                .collect(),
            output: c
                .output
                .into_iter()
                .map(|t| ModelOutput {
                    data_type: data_type(&t.data_type),
                    name: t.name,
                    dims: t.dims,
                })
                .collect(),
            backend: String::new(),
        }
    }
}

fn duration(d: kserve_repository::StatisticDuration) -> Option<StatisticDuration> {
    Some(StatisticDuration {
        count: d.count,
        ns: d.ns,
    })
}

impl From<kserve_repository::ModelStatistics> for ModelStatistics {
    fn from(s: kserve_repository::ModelStatistics) -> Self {
        ModelStatistics {
            name: s.name,
            version: s.version,
            last_inference: s.last_inference,
            inference_count: s.inference_count,
            execution_count: s.execution_count,
            inference_stats: Some(super::InferStatistics {
                success: duration(s.inference_stats.success),
                fail: duration(s.inference_stats.fail),
                ..Default::default()
            }),
        }
    }
}

impl From<RepositoryIndexEntry> for ModelIndex {
    fn from(e: RepositoryIndexEntry) -> Self {
        ModelIndex {
            name: e.name,
            version: e.version,
            state: e.state,
            reason: e.reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_datatypes_are_tritons_enumeration() {
        assert_eq!(data_type("TYPE_FP32"), DataType::TypeFp32 as i32);
        assert_eq!(data_type("TYPE_STRING"), DataType::TypeString as i32);
        assert_eq!(data_type("TYPE_BF16"), DataType::TypeBf16 as i32);
        assert_eq!(data_type("TYPE_NOPE"), DataType::TypeInvalid as i32);
    }
}

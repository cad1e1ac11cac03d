//! End-to-end tests: the real `wasmrpc` binary on a loopback port, real HTTP, and real guest
//! components built from source. One test binary so the guests are built once.

mod support;

mod artifacts;
mod browsers;
mod build_languages;
mod cli;
mod client_encodings;
mod client_sdk;
mod cluster;
mod cluster_chaos;
mod cluster_client;
mod cluster_storage;
mod cluster_trust;
mod compiles;
mod connections;
mod console;
mod embedded;
mod examples;
mod grpc;
mod grpc_client;
mod in_flight;
mod instantiation;
mod js_guests;
mod kserve;
mod kserve_binary;
mod kserve_repository;
mod large_components;
mod malformed;
mod new_project;
mod no_wasi;
mod openapi;
mod python_clients;
mod python_guests;
mod python_sdk;
mod registry;
mod requests;
mod sandbox;
mod secrets;
mod tenants;
mod tls;
mod traces;
mod uploads;
mod wasi_world;

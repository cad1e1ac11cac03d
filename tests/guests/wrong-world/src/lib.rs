//! A valid component that implements some other world, not `wasmrpc:tensor`: the host must
//! refuse it at upload, saying which exports it lacks.

wit_bindgen::generate!({
    inline: r#"
        package test:elsewhere;

        world other {
            export answer: func() -> u32;
        }
    "#,
});

struct Other;

impl Guest for Other {
    fn answer() -> u32 {
        42
    }
}

export!(Other);

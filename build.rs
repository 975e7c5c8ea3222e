//! Generates the gRPC code from `proto/` with no system protoc: `protox`
//! (pure Rust) compiles the .proto files into a descriptor set, which
//! `tonic-prost-build` turns into Rust. The encoded descriptor set is also
//! written to OUT_DIR for server reflection.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    // The kernel alone (no `server` feature) has no gRPC code to generate.
    #[cfg(feature = "server")]
    generate()?;
    Ok(())
}

#[cfg(feature = "server")]
fn generate() -> Result<(), Box<dyn std::error::Error>> {
    use std::path::PathBuf;
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_source_info(true);
    compiler.open_file("bspq/v1/bspq.proto")?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("bspq_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}

//! Build script: fingerprints the WGSL kernels (FNV-1a over `shaders/*.wgsl`) so the
//! autotuner's cache file changes name whenever a kernel changes (stale choices never load);
//! with feature `mpi`, compiles the C function that hands Rust the MPI library's MPI_IN_PLACE.

use std::fs;

fn main() {
    println!("cargo:rerun-if-changed=shaders");
    let mut paths: Vec<_> = fs::read_dir("shaders")
        .expect("shaders/ next to Cargo.toml")
        .map(|e| e.expect("readable shaders/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "wgsl"))
        .collect();
    paths.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for path in paths {
        println!("cargo:rerun-if-changed={}", path.display());
        let bytes = fs::read(&path).expect("readable shader");
        for b in path.file_name().unwrap().as_encoded_bytes().iter().chain(&bytes) {
            hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=WGDIFF_KERNELS_HASH={hash:016x}");
    #[cfg(feature = "mpi")]
    compile_mpi_in_place();
}

/// Builds src/distributed/mpi_in_place.c with the MPI library's compiler wrapper (or its
/// include paths).
#[cfg(feature = "mpi")]
fn compile_mpi_in_place() {
    let source = "src/distributed/mpi_in_place.c";
    println!("cargo:rerun-if-changed={source}");
    let lib =
        build_probe_mpi::probe().unwrap_or_else(|errors| {
            panic!(
            "feature `mpi` needs an MPI library (Debian: apt-get install libopenmpi-dev libclang-dev): {}",
            errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")
        )
        });
    let mut build = cc::Build::new();
    build.file(source);
    match lib.mpicc {
        Some(mpicc) => {
            build.compiler(mpicc);
        }
        None => {
            for dir in &lib.include_paths {
                build.include(dir);
            }
        }
    }
    build.compile("wgdiff_mpi");
}

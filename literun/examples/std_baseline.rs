//! The same kind of std program as `mobilenet_int8` without literun: `scripts/footprint.sh`
//! subtracts its size to measure what literun (and the embedded model) add to a binary.

fn main() -> Result<(), std::io::Error> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.iter().map(|a| a.len()).sum();
    println!("{} arguments, {n} bytes, {:.3}", args.len(), n as f32 / 3.0);
    Ok(())
}

fn main() {
    std::process::exit(c1m::cli::main());
}

// A source file the listing tests annotate: its lines are what the tests expect to see.
// It is not compiled.

fn main() {
    serve();
}

/// Serves.
fn serve() -> u64 {
    let a = parse(1);
    let b = parse(2);
    let c = checksum(a, b);
    log(c);
    c
}

fn parse(n: u64) -> u64 {
    n * 2
}

fn checksum(a: u64, b: u64) -> u64 {
    let mut x = a;
    for i in 0..b {
        x = x.rotate_left(5) ^ i;
    }
    x
}

fn log(_c: u64) {}

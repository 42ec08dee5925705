fn main() {
    println!("fslab");
}

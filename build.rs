//! `sqlx::migrate!` embeds `migrations/` when the crate compiles; without this, cargo does not
//! know that a new or changed migration file must rebuild the binary.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}

//! stub
use super::{ParseContext, Parsed};
use anyhow::Result;
pub fn parse(_c: &ParseContext, _b: &[u8]) -> Result<Parsed> { todo!() }

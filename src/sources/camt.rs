//! stub
use super::{ParseContext, Parsed};
use anyhow::Result;
pub fn parse(_c: &ParseContext, _b: &[u8], _f: crate::config::Format) -> Result<Parsed> { todo!() }

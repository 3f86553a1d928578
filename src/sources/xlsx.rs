//! stub
use super::{ParseContext, Parsed};
use anyhow::Result;
pub fn read_file(_c: &crate::config::SourceConfig, _p: &std::path::Path, _l: &mut super::SourceLoad) -> Result<bool> { todo!() }

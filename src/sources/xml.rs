//! The XML the ISO 20022 readers (camt.052/053/054, pain.002) share:
//! quick-xml events into a small element tree with the line of each start tag, elements handed
//! over one by one as they end (so a reader can drop what it has read), the declared encoding,
//! and ISO 20022 amounts (`Amt Ccy="EUR"`) in exact minor units.

use super::ParseContext;
use super::text::{self, line_of};
use crate::money::NumberFormat;
use anyhow::Result;
use quick_xml::events::Event;

/// A parsed element: local name, text content, children, 1-based line of its start tag.
#[derive(Debug, Default)]
pub(crate) struct El {
    /// Local name (namespace prefix removed).
    pub name: String,
    /// Attributes by local name.
    pub attrs: Vec<(String, String)>,
    /// Text content.
    pub text: String,
    /// Child elements, in order.
    pub children: Vec<El>,
    /// 1-based line of its start tag.
    pub line: u64,
}

impl El {
    pub(crate) fn child(&self, name: &str) -> Option<&El> {
        self.children.iter().find(|c| c.name == name)
    }
    pub(crate) fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a El> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }
    pub(crate) fn path(&self, path: &[&str]) -> Option<&El> {
        let mut e = self;
        for p in path {
            e = e.child(p)?;
        }
        Some(e)
    }
    pub(crate) fn text_at(&self, path: &[&str]) -> Option<&str> {
        self.path(path)
            .map(|e| e.text.trim())
            .filter(|t| !t.is_empty())
    }
    pub(crate) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

pub(crate) fn local(name: &str) -> String {
    let s = name;
    match s.rfind(':') {
        Some(p) => s[p + 1..].to_string(),
        None => s.to_string(),
    }
}

/// Reads `xml` into an element tree and returns its root element. Each element, once whole,
/// goes to `ended` with its open ancestors (`ancestors[0]` is an unnamed holder of the root
/// element): it is kept as its parent's child when `ended` gives it back, dropped otherwise
/// (`parse` takes the entries this way, so the tree never holds more than one of them).
/// Errors here are the XML's own; `ended` keeps its own errors for later.
pub(crate) fn tree(
    ctx: &ParseContext,
    xml: &str,
    mut ended: impl FnMut(&[El], El) -> Option<El>,
) -> Result<El> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack: Vec<El> = vec![El::default()];
    // Byte offset → line number by binary search over line starts (not a count per element).
    let starts: Vec<usize> = std::iter::once(0)
        .chain(xml.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let pos_line = |p: u64| starts.partition_point(|&s| s <= p as usize) as u64;
    loop {
        let at = reader.buffer_position();
        let ev = reader.read_event().map_err(|e| {
            ctx.error(
                pos_line(reader.error_position()),
                format!("not well-formed XML: {e}"),
            )
        })?;
        match ev {
            Event::Start(e) => {
                let el = element(ctx, &e, pos_line(at + 1))?;
                stack.push(el);
            }
            Event::Empty(e) => {
                let el = element(ctx, &e, pos_line(at + 1))?;
                if let Some(el) = ended(&stack, el)
                    && let Some(parent) = stack.last_mut()
                {
                    parent.children.push(el);
                }
            }
            Event::End(_) => {
                let el = stack
                    .pop()
                    .ok_or_else(|| ctx.error(pos_line(at), "unbalanced end tag"))?;
                if stack.is_empty() {
                    return Err(ctx.error(pos_line(at), "unbalanced end tag"));
                }
                if let Some(el) = ended(&stack, el)
                    && let Some(parent) = stack.last_mut()
                {
                    parent.children.push(el);
                }
            }
            Event::Text(t) => {
                if let Some(cur) = stack.last_mut() {
                    cur.text.push_str(&t.xml10_content());
                }
            }
            Event::CData(t) => {
                if let Some(cur) = stack.last_mut() {
                    cur.text.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                let s: String = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => match &*r {
                        "amp" => "&".into(),
                        "lt" => "<".into(),
                        "gt" => ">".into(),
                        "quot" => "\"".into(),
                        "apos" => "'".into(),
                        other => {
                            return Err(
                                ctx.error(pos_line(at), format!("unknown entity &{other};"))
                            );
                        }
                    },
                };
                if let Some(cur) = stack.last_mut() {
                    cur.text.push_str(&s);
                }
            }
            Event::DocType(_) => {
                return Err(ctx.error(
                    pos_line(at),
                    "DOCTYPE declarations are not accepted in XML statement and status files",
                ));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if stack.len() != 1 {
        return Err(ctx.error(
            line_of(xml, xml.len()),
            "XML ends inside an element (truncated?)",
        ));
    }
    let root = stack.pop().unwrap_or_default();
    let mut elements = root.children.into_iter();
    let doc = elements
        .next()
        .ok_or_else(|| ctx.error(1, "no XML root element"))?;
    Ok(doc)
}

pub(crate) fn element(
    ctx: &ParseContext,
    e: &quick_xml::events::BytesStart<'_>,
    line: u64,
) -> Result<El> {
    let mut attrs = Vec::new();
    for a in e.attributes() {
        let a = a.map_err(|err| ctx.error(line, format!("bad attribute: {err}")))?;
        let v = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|err| ctx.error(line, format!("bad attribute value: {err}")))?;
        attrs.push((local(a.key.as_ref()), v.into_owned()));
    }
    Ok(El {
        name: local(e.name().as_ref()),
        attrs,
        line,
        ..El::default()
    })
}

pub(crate) fn decode_xml<'b>(
    ctx: &ParseContext,
    bytes: &'b [u8],
) -> Result<std::borrow::Cow<'b, str>> {
    // The declaration names the encoding; UTF-8 when absent.
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
    let declared = head
        .find("encoding=")
        .and_then(|p| {
            let rest = &head[p + 9..];
            let q = rest.chars().next()?;
            let rest = &rest[q.len_utf8()..];
            rest.find(q).map(|e| rest[..e].to_string())
        })
        .filter(|_| head.trim_start_matches('\u{feff}').starts_with("<?xml"));
    let mut c = ctx.clone();
    c.encoding = match declared.as_deref().map(str::trim) {
        None => None,
        Some(label) => {
            let enc = encoding_rs::Encoding::for_label(label.as_bytes())
                .ok_or_else(|| ctx.error(1, format!("unknown XML encoding {label:?}")))?;
            (enc != encoding_rs::UTF_8).then_some(super::TextEncoding::Whatwg(enc))
        }
    };
    text::decode(&c, bytes)
}

pub(crate) fn dec(ctx: &ParseContext, el: &El, what: &str) -> Result<rust_decimal::Decimal> {
    crate::money::parse_decimal(el.text.trim(), NumberFormat::DOT)
        .map_err(|e| ctx.error(el.line, format!("{what}: {e}")))
}

/// An `Amt`-like element with its `Ccy` attribute, in minor units.
pub(crate) fn money(ctx: &ParseContext, el: &El, what: &str) -> Result<(i64, &'static str)> {
    let ccy = el
        .attr("Ccy")
        .ok_or_else(|| ctx.error(el.line, format!("{what}: amount without a Ccy attribute")))?;
    let (code, _) = text::currency(ccy).map_err(|e| ctx.error(el.line, format!("{what}: {e}")))?;
    let v = dec(ctx, el, what)?;
    if v.is_sign_negative() {
        return Err(ctx.error(
            el.line,
            format!(
                "{what}: negative amount (ISO 20022 amounts are unsigned; CdtDbtInd gives the direction)"
            ),
        ));
    }
    let m = text::minor(v, code).map_err(|e| ctx.error(el.line, format!("{what}: {e}")))?;
    Ok((m, code))
}

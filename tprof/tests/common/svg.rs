//! Reading the `svg` export back: its frames, parsed with an XML parser.

#![allow(clippy::unwrap_used)]

use quick_xml::XmlVersion;
use quick_xml::events::Event;

/// One frame of an inferno SVG: the name in its title, its width in units and in percent.
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) title: String,
    pub(crate) name: String,
    pub(crate) units: u64,
    pub(crate) width_pct: f64,
}

/// The SVG's frames, read with an XML parser; and the `total_samples` of the frames box.
pub(crate) fn svg_frames(svg: &str) -> (Vec<Frame>, u64) {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut frames = Vec::new();
    let mut total = None;
    let mut in_g = false;
    let mut in_title = false;
    let mut title = String::new();
    loop {
        match reader.read_event().expect("the SVG is well-formed XML") {
            Event::Eof => break,
            Event::Start(e) if e.name().as_ref() == b"svg" => {
                if let Some(a) = e.try_get_attribute("total_samples").unwrap() {
                    total = Some(
                        a.normalized_value(XmlVersion::Implicit1_0)
                            .unwrap()
                            .parse()
                            .unwrap(),
                    );
                }
            }
            Event::Start(e) if e.name().as_ref() == b"g" => {
                in_g = true;
                title.clear();
            }
            Event::End(e) if e.name().as_ref() == b"g" => in_g = false,
            Event::Start(e) if in_g && e.name().as_ref() == b"title" => in_title = true,
            Event::End(e) if e.name().as_ref() == b"title" => in_title = false,
            Event::Text(t) if in_title => title.push_str(&t.decode().unwrap()),
            Event::GeneralRef(r) if in_title => {
                let name = r.decode().unwrap();
                let c = match name.as_ref() {
                    "lt" => "<",
                    "gt" => ">",
                    "amp" => "&",
                    "quot" => "\"",
                    "apos" => "'",
                    other => panic!("unexpected entity &{other};"),
                };
                title.push_str(c);
            }
            Event::Empty(e) if in_g && e.name().as_ref() == b"rect" => {
                let attr = |name: &str| {
                    e.try_get_attribute(name)
                        .unwrap()
                        .unwrap_or_else(|| panic!("a frame's rect has {name}"))
                        .normalized_value(XmlVersion::Implicit1_0)
                        .unwrap()
                        .into_owned()
                };
                let units: u64 = attr("fg:w").parse().unwrap();
                let width_pct: f64 = attr("width").trim_end_matches('%').parse().unwrap();
                let (name, _) = title
                    .rsplit_once(" (")
                    .expect("title is `name (n unit, p%)`");
                frames.push(Frame {
                    title: title.clone(),
                    name: name.to_owned(),
                    units,
                    width_pct,
                });
            }
            _ => {}
        }
    }
    (frames, total.expect("the frames box has total_samples"))
}

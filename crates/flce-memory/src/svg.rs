//! Peak memory against sequence length for every combination, as a self-contained SVG line chart
//! with the GPU's size drawn across it (`flce plan --plot`), or that chart as a PNG (resvg).

use crate::estimate::{estimate, Activations, Loss};
use crate::model::Model;
use crate::report::Request;

/// One curve: its combination and the peak (bytes) at each sequence length.
pub struct Curve {
    pub loss: Loss,
    pub activations: Activations,
    pub peaks: Vec<u64>,
}

/// Peak memory of every combination at each of `seqs`.
pub fn curves(model: &Model, req: &Request, seqs: &[u64]) -> Vec<Curve> {
    let mut out = vec![];
    for loss in Loss::ALL {
        for activations in Activations::ALL {
            let peaks =
                seqs.iter().map(|&seq_len| estimate(model, &req.setup(loss, activations, seq_len)).peak).collect();
            out.push(Curve { loss, activations, peaks });
        }
    }
    out
}

/// Write the chart of sequence lengths 256 to 1M tokens to `path`: a PNG where the path ends in
/// `.png` (any case), an SVG otherwise.
pub fn write_chart(model: &Model, req: &Request, path: &std::path::Path) -> std::io::Result<()> {
    let seqs = doubling_seqs(1 << 20);
    let chart = svg(model, req, &seqs, &curves(model, req, &seqs));
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")) {
        std::fs::write(path, png(&chart)?)
    } else {
        std::fs::write(path, chart)
    }
}

/// DejaVu Sans (fonts/LICENSE_DEJAVU): the PNG's text does not depend on the fonts a machine has.
const SANS: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// One of this module's charts rasterised (resvg) at its own size, as PNG bytes.
pub fn png(svg: &str) -> std::io::Result<Vec<u8>> {
    use resvg::{tiny_skia, usvg};
    let bad = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let mut opt = usvg::Options::default();
    let fonts = opt.fontdb_mut();
    fonts.load_font_data(SANS.to_vec());
    fonts.set_sans_serif_family("DejaVu Sans");
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| bad(format!("the chart's SVG: {e}")))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| bad(format!("a {}x{} image", size.width(), size.height())))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| bad(format!("PNG encoding: {e}")))
}

/// Sequence lengths from 256 to `max`, doubling.
pub fn doubling_seqs(max: u64) -> Vec<u64> {
    std::iter::successors(Some(256u64), |&s| (s < max).then_some(s * 2)).collect()
}

/// The chart: x = sequence length (log2 scale), y = peak GiB (clipped at 4× the GPU), one line per
/// combination (colour = loss, dash = activation handling), the GPU's size as a red line.
pub fn svg(model: &Model, req: &Request, seqs: &[u64], curves: &[Curve]) -> String {
    let (w, h, left, right, top, bottom) = (960.0, 560.0, 70.0, 300.0, 40.0, 50.0);
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let y_max = (gib(req.gpu_bytes) * 4.0).max(1.0);
    let (x0, x1) = ((seqs[0] as f64).log2(), (*seqs.last().expect("a sequence length") as f64).log2());
    let px = |s: u64| left + ((s as f64).log2() - x0) / (x1 - x0).max(1e-9) * (w - left - right);
    let py = |g: f64| h - bottom - g.min(y_max) / y_max * (h - top - bottom);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">
<rect width="{w}" height="{h}" fill="white"/>
<text x="{left}" y="22" font-size="15">{} — peak memory of one training step ({}, batch {})</text>
"#,
        model.name,
        req.lora_rank.map_or("full fine-tune".into(), |r| format!("LoRA r {r}")),
        req.batch
    );
    // axes and ticks
    s += &format!(
        r#"<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="black"/>
"#,
        h - bottom,
        w - right,
        h - bottom,
        h - bottom
    );
    for &q in seqs {
        let label = if q >= 1024 { format!("{}k", q / 1024) } else { q.to_string() };
        s += &format!(r#"<text x="{:.1}" y="{}" text-anchor="middle">{label}</text>"#, px(q), h - bottom + 16.0);
        s.push('\n');
    }
    for k in 0..=4 {
        let g = y_max * k as f64 / 4.0;
        s += &format!(r#"<text x="{}" y="{:.1}" text-anchor="end">{g:.0}</text>"#, left - 6.0, py(g) + 4.0);
        s.push('\n');
    }
    s += &format!(
        r#"<text x="{}" y="{}" text-anchor="middle">sequence length (tokens)</text><text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">peak GiB</text>
"#,
        (left + w - right) / 2.0,
        h - 10.0,
        h / 2.0,
        h / 2.0
    );
    // the card
    let card = py(gib(req.gpu_bytes));
    s += &format!(
        r#"<line x1="{left}" y1="{card:.1}" x2="{}" y2="{card:.1}" stroke="red" stroke-width="2"/><text x="{}" y="{:.1}" fill="red">GPU {:.0} GiB</text>
"#,
        w - right,
        w - right + 6.0,
        card + 4.0,
        gib(req.gpu_bytes)
    );
    for (k, c) in curves.iter().enumerate() {
        let colour = match c.loss {
            Loss::Plain => "#1f77b4",
            Loss::Compile => "#ff7f0e",
            Loss::Flce => "#2ca02c",
        };
        let dash = match c.activations {
            Activations::Kept => "",
            Activations::Checkpointed => r#" stroke-dasharray="6 4""#,
            Activations::Offloaded => r#" stroke-dasharray="2 3""#,
        };
        let points: Vec<String> =
            seqs.iter().zip(&c.peaks).map(|(&q, &p)| format!("{:.1},{:.1}", px(q), py(gib(p)))).collect();
        s += &format!(
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{}"/>
<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{colour}" stroke-width="2"{dash}/><text x="{}" y="{}">{}, {}</text>
"#,
            points.join(" "),
            w - right + 6.0,
            top + 40.0 + 18.0 * k as f64,
            w - right + 30.0,
            top + 40.0 + 18.0 * k as f64,
            w - right + 34.0,
            top + 44.0 + 18.0 * k as f64,
            c.loss.name(),
            c.activations.name()
        );
    }
    s += "</svg>\n";
    s
}

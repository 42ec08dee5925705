//! `fslab device probe`: what the probe measured; `--format toml` is the
//! `device = { … }` line that emulates it.

use comfy_table::Table;

use crate::human;
use crate::media::probe::Probe;
use crate::report::Document;
use crate::units::Bytes;

impl Document for Probe {
    fn what(&self) -> &'static str {
        "a device probe"
    }

    fn text(&self) -> String {
        render(self)
    }

    fn toml(&self) -> Option<String> {
        Some(format!("{}\n", self.device_line()))
    }
}

fn size(bytes: Option<u64>) -> String {
    bytes.map_or("not found".into(), |b| Bytes(b).to_string())
}

fn render(p: &Probe) -> String {
    let mut out = String::new();
    let mut summary = Table::new();
    summary.set_header(["figure", "value"]);
    summary.add_row(["AU size".to_string(), size(p.au)]);
    summary.add_row(["page size".to_string(), size(p.page)]);
    let open = match (p.open_aus, p.au) {
        (Some(n), _) => n.to_string(),
        (None, Some(_)) => format!("more than {}", p.open_au_steps.len()),
        (None, None) => "none (no AUs)".to_string(),
    };
    summary.add_row(["open AUs".to_string(), open]);
    summary.add_row([
        "linear only".to_string(),
        p.linear_only.map_or("not measured".into(), |l| if l { "yes" } else { "no" }.into()),
    ]);
    for (name, line) in [("write", p.write), ("read", p.read)] {
        if let Some(line) = line {
            summary.add_row([
                format!("{name}: per command, rate"),
                format!("{}, {} MB/s", human::duration_s(line.latency_s), human::number(line.mbps)),
            ]);
        }
    }
    if let Some(copy) = p.copy_mbps {
        summary.add_row(["GC copy rate".to_string(), format!("{} MB/s", human::number(copy))]);
    }
    out.push_str(&format!("{summary}\n\nAU test (write straddling a boundary vs just after it):\n"));
    let mut au = Table::new();
    au.set_header(["boundary", "straddling", "after", "jump"]);
    for s in &p.au_steps {
        au.add_row([
            Bytes(s.boundary).to_string(),
            human::duration_s(s.straddling_s),
            human::duration_s(s.after_s),
            if s.jump { "yes" } else { "" }.to_string(),
        ]);
    }
    out.push_str(&format!("{au}\n\nopen-AU test (streams written round-robin):\n"));
    let mut open = Table::new();
    open.set_header(["streams", "MB/s"]);
    for s in &p.open_au_steps {
        open.add_row([s.streams.to_string(), human::number(s.mbps)]);
    }
    out.push_str(&format!("{open}\n\nrates:\n"));
    let mut rates = Table::new();
    rates.set_header(["pattern", "size", "requests", "per request", "MB/s", "IOPS"]);
    for r in &p.rates {
        rates.add_row([
            r.pattern.to_string(),
            Bytes(r.size).to_string(),
            r.requests.to_string(),
            human::duration_s(r.seconds),
            human::number(r.mbps),
            human::number(r.iops),
        ]);
    }
    out.push_str(&format!("{rates}\n\n{}\n", p.device_line()));
    out.push_str(&format!("probed {} in {}\n", p.device, human::duration_s(p.elapsed_s)));
    out
}

//! Parses `nvidia-smi -q -x` XML, `nvidia-smi -q` text, `nvidia-smi --query-gpu=... --format=csv`
//! and the plain `nvidia-smi` table into one [`NvidiaGpu`] per board.

use quick_xml::events::Event;
use quick_xml::Reader;
use serde::{Deserialize, Serialize};

use super::outcome::{key_value, leading_number, Probe};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvidiaGpu {
    pub name: String,
    pub uuid: Option<String>,
    /// `sm_XY`.
    pub compute_capability: Option<String>,
    pub compute_capability_source: Option<ComputeCapabilitySource>,
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
    pub memory_total_mib: Option<u64>,
    /// `Enabled` / `Disabled` / `N/A`, as the tool says.
    pub mig_mode: Option<String>,
    pub ecc_mode: Option<String>,
    pub power_limit_w: Option<f64>,
    /// The graphics clock applications run at (`Applications Clocks` / `applications_clocks`),
    /// which an operator may have locked below the maximum.
    #[serde(default)]
    pub applications_graphics_clock_mhz: Option<u32>,
    /// `Max Clocks` / `max_clocks`, SM.
    #[serde(default)]
    pub max_sm_clock_mhz: Option<u32>,
    /// nvidia-smi does not report the SM count; `None` unless a source gives it.
    pub sm_count: Option<u32>,
}

/// Where `compute_capability` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeCapabilitySource {
    /// The tool printed it (`compute_cap` column or element).
    Reported,
    /// Looked up from the product name in [`capability_from_name`]'s table.
    ProductName,
}

impl NvidiaGpu {
    fn named(name: String) -> Self {
        NvidiaGpu {
            name,
            uuid: None,
            compute_capability: None,
            compute_capability_source: None,
            driver_version: None,
            cuda_version: None,
            memory_total_mib: None,
            mig_mode: None,
            ecc_mode: None,
            power_limit_w: None,
            applications_graphics_clock_mhz: None,
            max_sm_clock_mhz: None,
            sm_count: None,
        }
    }

    fn set_reported_capability(&mut self, value: &str) {
        if let Some(sm) = sm_from_dotted(value) {
            self.compute_capability = Some(sm);
            self.compute_capability_source = Some(ComputeCapabilitySource::Reported);
        }
    }

    fn fill_capability_from_name(&mut self) {
        if self.compute_capability.is_none() {
            if let Some(sm) = capability_from_name(&self.name) {
                self.compute_capability = Some(sm.to_owned());
                self.compute_capability_source = Some(ComputeCapabilitySource::ProductName);
            }
        }
    }
}

/// Product-name fragments → compute capability, from NVIDIA's CUDA GPU list
/// (https://developer.nvidia.com/cuda-gpus and its legacy page). Checked in order; the first
/// fragment found wins, so workstation names that hold a GeForce series' digits ("Quadro RTX
/// 4000" is 7.5, "RTX 5000 Ada Generation" 8.9) come before "RTX 50" and "RTX 40". The RTX PRO
/// line is Blackwell (12.0), like GeForce RTX 50, laptop parts included.
#[rustfmt::skip]
const CAPABILITY_BY_NAME: &[(&str, &str)] = &[
    ("GB300", "sm_103"), ("B300", "sm_103"),
    ("GB200", "sm_100"), ("B200", "sm_100"), ("B100", "sm_100"),
    ("GH200", "sm_90"), ("H200", "sm_90"), ("H100", "sm_90"), ("H800", "sm_90"),
    ("Quadro RTX", "sm_75"), ("Ada Generation", "sm_89"),
    ("RTX PRO", "sm_120"), ("RTX 50", "sm_120"),
    ("L40S", "sm_89"), ("L40", "sm_89"), ("L4", "sm_89"), ("RTX 40", "sm_89"),
    ("A100", "sm_80"), ("A800", "sm_80"), ("A30", "sm_80"),
    ("A10", "sm_86"), ("A40", "sm_86"), ("RTX 30", "sm_86"),
    ("T4", "sm_75"), ("V100", "sm_70"),
];

/// The compute capability an NVIDIA product name implies, when the table knows it.
pub fn capability_from_name(name: &str) -> Option<&'static str> {
    CAPABILITY_BY_NAME
        .iter()
        .find(|(fragment, _)| name.contains(fragment))
        .map(|(_, sm)| *sm)
}

/// The plain `nvidia-smi` table cuts a product name too long for its column and ends it with
/// `...` (`NVIDIA GeForce RTX 5090 ...` for the RTX 5090 Laptop GPU). Such a name still gives
/// the product's series, but not which variant of it.
pub fn name_is_cut_short(name: &str) -> bool {
    name.ends_with("...")
}

fn sm_from_dotted(value: &str) -> Option<String> {
    let (major, minor) = value.trim().split_once('.')?;
    let major: u32 = major.parse().ok()?;
    let minor: u32 = minor.parse().ok()?;
    Some(format!("sm_{major}{minor}"))
}

fn known(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty() && value != "N/A" && !value.starts_with("[N/A")).then(|| value.to_owned())
}

fn mib(value: &str) -> Option<u64> {
    leading_number(value.trim()).map(|n| n as u64)
}

/// `1410 MHz` → 1410; `N/A` → None.
fn mhz(value: &str) -> Option<u32> {
    leading_number(value.trim()).map(|n| n as u32)
}

/// Parses `nvidia-smi -q -x`; absent when the text is empty or lists no `<gpu>`.
pub fn parse_nvidia_smi_xml(text: &str) -> Probe<Vec<NvidiaGpu>> {
    if text.trim().is_empty() {
        return Probe::absent("nvidia-smi -q -x printed nothing");
    }
    let mut reader = Reader::from_str(text);
    let mut path: Vec<String> = Vec::new();
    let mut gpus: Vec<NvidiaGpu> = Vec::new();
    let mut driver: Option<String> = None;
    let mut cuda: Option<String> = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(tag)) => {
                let name = tag.name().into_inner().to_string();
                if name == "gpu" && path.len() == 1 {
                    gpus.push(NvidiaGpu::named(String::new()));
                }
                path.push(name);
            }
            Ok(Event::End(_)) => {
                path.pop();
            }
            Ok(Event::Text(raw)) => {
                let value = raw.xml10_content().trim().to_owned();
                if value.is_empty() {
                    continue;
                }
                let joined = path.join("/");
                match joined.as_str() {
                    "nvidia_smi_log/driver_version" => driver = Some(value),
                    "nvidia_smi_log/cuda_version" => cuda = known(&value),
                    _ => {
                        let Some(gpu) = gpus.last_mut() else { continue };
                        let Some(rest) = joined.strip_prefix("nvidia_smi_log/gpu/") else {
                            continue;
                        };
                        match rest {
                            "product_name" => gpu.name = value,
                            "uuid" => gpu.uuid = known(&value),
                            "compute_cap" => gpu.set_reported_capability(&value),
                            "fb_memory_usage/total" => gpu.memory_total_mib = mib(&value),
                            "mig_mode/current_mig" => gpu.mig_mode = known(&value),
                            "ecc_mode/current_ecc" => gpu.ecc_mode = known(&value),
                            "applications_clocks/graphics_clock" => {
                                gpu.applications_graphics_clock_mhz = mhz(&value)
                            }
                            "max_clocks/sm_clock" => gpu.max_sm_clock_mhz = mhz(&value),
                            "gpu_power_readings/current_power_limit"
                            | "power_readings/current_power_limit"
                            | "power_readings/power_limit" => {
                                gpu.power_limit_w = leading_number(&value)
                            }
                            _ => {}
                        }
                    }
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(err) => {
                return Probe::absent(format!("nvidia-smi -q -x output is not valid XML: {err}"))
            }
        }
    }
    finish(gpus, driver, cuda, "nvidia-smi -q -x lists no <gpu>")
}

/// Parses `nvidia-smi --query-gpu=<fields> --format=csv[,nounits]`, columns named by the header.
pub fn parse_nvidia_smi_csv(text: &str) -> Probe<Vec<NvidiaGpu>> {
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    let Some(header) = lines.next() else {
        return Probe::absent("nvidia-smi --query-gpu printed nothing");
    };
    let columns: Vec<String> = header
        .split(',')
        .map(|c| c.split('[').next().unwrap_or("").trim().to_owned())
        .collect();
    if !columns.iter().any(|c| c == "name") {
        return Probe::absent(format!(
            "nvidia-smi --query-gpu output has no `name` column (header: {header})"
        ));
    }
    let mut gpus = Vec::new();
    for line in lines {
        let mut gpu = NvidiaGpu::named(String::new());
        for (column, value) in columns.iter().zip(line.split(',')) {
            let value = value.trim();
            match column.as_str() {
                "name" => gpu.name = value.to_owned(),
                "uuid" => gpu.uuid = known(value),
                "compute_cap" => gpu.set_reported_capability(value),
                "driver_version" => gpu.driver_version = known(value),
                "memory.total" => gpu.memory_total_mib = mib(value),
                "mig.mode.current" => gpu.mig_mode = known(value),
                "ecc.mode.current" => gpu.ecc_mode = known(value),
                "power.limit" | "enforced.power.limit" => gpu.power_limit_w = leading_number(value),
                "clocks.applications.graphics" | "clocks.applications.gr" => {
                    gpu.applications_graphics_clock_mhz = mhz(value)
                }
                "clocks.max.sm" => gpu.max_sm_clock_mhz = mhz(value),
                _ => {}
            }
        }
        gpu.fill_capability_from_name();
        gpus.push(gpu);
    }
    if gpus.is_empty() {
        Probe::absent("nvidia-smi --query-gpu printed a header but no GPU rows")
    } else {
        Probe::Found(gpus)
    }
}

/// Parses the text form of `nvidia-smi -q` (also printed by `nvidia-smi -a`).
pub fn parse_nvidia_smi_q_text(text: &str) -> Probe<Vec<NvidiaGpu>> {
    let mut gpus: Vec<NvidiaGpu> = Vec::new();
    let mut driver = None;
    let mut cuda = None;
    // Section names by indentation depth (4 spaces a level) inside the current GPU.
    let mut sections: Vec<(usize, String)> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if indent == 0 {
            if line.starts_with("GPU ") && !line.contains(" : ") {
                gpus.push(NvidiaGpu::named(String::new()));
                sections.clear();
                continue;
            }
            if let Some((key, value)) = key_value(line) {
                match key {
                    "Driver Version" => driver = known(value),
                    "CUDA Version" => cuda = known(value),
                    _ => {}
                }
            }
            continue;
        }
        sections.retain(|(depth, _)| *depth < indent);
        let Some(gpu) = gpus.last_mut() else { continue };
        match key_value(line) {
            None => sections.push((indent, line.trim().to_owned())),
            Some((key, value)) => {
                let section = sections.last().map(|(_, s)| s.as_str()).unwrap_or("");
                match (section, key) {
                    ("", "Product Name") => gpu.name = value.to_owned(),
                    ("", "GPU UUID") => gpu.uuid = known(value),
                    ("MIG Mode", "Current") => gpu.mig_mode = known(value),
                    ("FB Memory Usage", "Total") => gpu.memory_total_mib = mib(value),
                    ("ECC Mode", "Current") => gpu.ecc_mode = known(value),
                    ("Applications Clocks", "Graphics") => {
                        gpu.applications_graphics_clock_mhz = mhz(value)
                    }
                    ("Max Clocks", "SM") => gpu.max_sm_clock_mhz = mhz(value),
                    ("GPU Power Readings" | "Power Readings", "Current Power Limit")
                    | ("Power Readings", "Power Limit") => {
                        gpu.power_limit_w = leading_number(value)
                    }
                    _ => {}
                }
            }
        }
    }
    finish(gpus, driver, cuda, "nvidia-smi -q lists no GPU")
}

/// Parses the plain `nvidia-smi` table: the driver and CUDA versions of its header, and per GPU
/// the product name of its first row, the power cap and memory total of its second and the MIG
/// mode of its third, where the table has one. A product name the table cut short keeps its
/// `...` (see [`name_is_cut_short`]); the compute capability still comes from the name's
/// series. GPUs are listed in the table's order, which is their index order.
pub fn parse_nvidia_smi_table(text: &str) -> Probe<Vec<NvidiaGpu>> {
    let mut gpus: Vec<NvidiaGpu> = Vec::new();
    let mut driver = None;
    let mut cuda = None;
    // Rows read below the current GPU's first row.
    let mut below = 0;
    for line in text.lines() {
        if let Some((driver_version, cuda_version)) = table_versions(line) {
            (driver, cuda) = (driver_version, cuda_version);
            continue;
        }
        if let Some(name) = table_gpu_row(line) {
            gpus.push(NvidiaGpu::named(name));
            below = 0;
            continue;
        }
        let Some(gpu) = gpus.last_mut() else { continue };
        below += 1;
        let cells: Vec<&str> = line.split('|').collect();
        match below {
            1 => read_table_usage_row(gpu, &cells),
            2 => read_table_mig_row(gpu, &cells),
            _ => {}
        }
    }
    finish(gpus, driver, cuda, "the nvidia-smi table lists no GPU")
}

/// `| NVIDIA-SMI 550.127.05   Driver Version: 550.127.05   CUDA Version: 12.4   |` → the driver
/// and CUDA versions; `None` for any other line.
fn table_versions(line: &str) -> Option<(Option<String>, Option<String>)> {
    let driver = word_after(line, "Driver Version:")?;
    let cuda = word_after(line, "CUDA Version:").and_then(known);
    Some((known(driver), cuda))
}

fn word_after<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    line.split_once(label)?.1.split_whitespace().next()
}

/// A GPU's first row, `|   0  NVIDIA L40S    On  |   00000000:A1:00.0 Off |   0 |`: its product
/// name. Told from the other rows by the GPU index that starts it and the PCI bus id in its
/// second cell.
fn table_gpu_row(line: &str) -> Option<String> {
    let cells: Vec<&str> = line.split('|').collect();
    let bus_id = cells.get(2)?.split_whitespace().next()?;
    if !is_pci_bus_id(bus_id) {
        return None;
    }
    let (index, rest) = cells[1].trim().split_once(char::is_whitespace)?;
    index.parse::<u32>().ok()?;
    Some(table_product_name(rest))
}

/// `00000000:A1:00.0`: domain, bus, device and function in hex.
fn is_pci_bus_id(word: &str) -> bool {
    word.matches(':').count() == 2
        && word.contains('.')
        && word
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
}

/// The name cell less its last word, the persistence mode (`On` / `Off`) or, on Windows, the
/// driver model (`WDDM` / `TCC` / `MCDM`).
fn table_product_name(cell: &str) -> String {
    const MODES: &[&str] = &["On", "Off", "WDDM", "TCC", "MCDM", "N/A"];
    let cell = cell.trim();
    match cell.rsplit_once(char::is_whitespace) {
        Some((name, mode)) if MODES.contains(&mode) => name.trim().to_owned(),
        _ => cell.to_owned(),
    }
}

/// `| N/A   31C    P8     33W /  350W |   1MiB /  46068MiB |  0%  Default |`: the power cap
/// and the memory total.
fn read_table_usage_row(gpu: &mut NvidiaGpu, cells: &[&str]) {
    gpu.power_limit_w = after_slash(cells, 1).and_then(leading_number);
    gpu.memory_total_mib = after_slash(cells, 2).and_then(mib);
}

/// `N/A   31C    P8   33W /  350W` → `350W`: the total or cap after the last slash of cell `at`
/// (the fan speed before it may be `N/A`).
fn after_slash<'a>(cells: &[&'a str], at: usize) -> Option<&'a str> {
    Some(cells.get(at)?.rsplit_once('/')?.1.trim())
}

/// `|      |      |   Disabled |`: the MIG mode, under the header's `MIG M.`.
fn read_table_mig_row(gpu: &mut NvidiaGpu, cells: &[&str]) {
    if cells.len() == 5 && cells[1].trim().is_empty() && cells[2].trim().is_empty() {
        gpu.mig_mode = known(cells[3]);
    }
}

fn finish(
    mut gpus: Vec<NvidiaGpu>,
    driver: Option<String>,
    cuda: Option<String>,
    none: &str,
) -> Probe<Vec<NvidiaGpu>> {
    if gpus.is_empty() {
        return Probe::absent(none);
    }
    for gpu in &mut gpus {
        gpu.driver_version = gpu.driver_version.take().or_else(|| driver.clone());
        gpu.cuda_version = gpu.cuda_version.take().or_else(|| cuda.clone());
        gpu.fill_capability_from_name();
    }
    Probe::Found(gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(probe: Probe<Vec<NvidiaGpu>>) -> Vec<NvidiaGpu> {
        match probe {
            Probe::Found(gpus) => gpus,
            Probe::Absent { reason } => panic!("absent: {reason}"),
        }
    }

    #[test]
    fn a100_xml_with_mig_enabled() {
        let gpus = found(parse_nvidia_smi_xml(include_str!(
            "../../../fixtures/probes/a100-sxm4-80gb-telegraf/nvidia-smi-q-x.xml"
        )));
        assert_eq!(gpus.len(), 1, "the capture keeps 1 of the 4 attached GPUs");
        let gpu = &gpus[0];
        assert_eq!(gpu.name, "NVIDIA A100-SXM4-80GB");
        assert_eq!(
            gpu.uuid.as_deref(),
            Some("GPU-513536b6-7d19-9063-b049-1e69664bb298")
        );
        assert_eq!(gpu.compute_capability.as_deref(), Some("sm_80"));
        assert_eq!(
            gpu.compute_capability_source,
            Some(ComputeCapabilitySource::ProductName)
        );
        assert_eq!(gpu.driver_version.as_deref(), Some("535.54.03"));
        assert_eq!(gpu.cuda_version.as_deref(), Some("12.2"));
        assert_eq!(
            gpu.memory_total_mib,
            Some(81920),
            "not a MIG slice's 19968 MiB"
        );
        assert_eq!(gpu.mig_mode.as_deref(), Some("Enabled"));
        assert_eq!(gpu.ecc_mode.as_deref(), Some("Enabled"));
        assert_eq!(
            gpu.power_limit_w,
            Some(500.0),
            "gpu, not module, power limit"
        );
        assert_eq!(gpu.applications_graphics_clock_mhz, Some(1275));
        assert_eq!(gpu.max_sm_clock_mhz, Some(1410));
        assert_eq!(gpu.sm_count, None);
    }

    #[test]
    fn h100_query_csv_reports_compute_cap() {
        let gpus = found(parse_nvidia_smi_csv(include_str!(
            "../../../fixtures/probes/h100x8-cutlass-readme/nvidia-smi-query.csv"
        )));
        assert_eq!(gpus.len(), 8);
        for gpu in &gpus {
            assert_eq!(gpu.name, "NVIDIA H100 80GB HBM3");
            assert_eq!(gpu.compute_capability.as_deref(), Some("sm_90"));
            assert_eq!(
                gpu.compute_capability_source,
                Some(ComputeCapabilitySource::Reported)
            );
            assert_eq!(gpu.uuid, None);
            assert_eq!(gpu.memory_total_mib, None);
        }
    }

    #[test]
    fn h100_q_text() {
        let gpus = found(parse_nvidia_smi_q_text(include_str!(
            "../../../fixtures/probes/h100-sxm5-della-pli/nvidia-smi-q.txt"
        )));
        assert_eq!(gpus.len(), 1);
        let gpu = &gpus[0];
        assert_eq!(gpu.name, "NVIDIA H100 80GB HBM3");
        assert_eq!(
            gpu.uuid.as_deref(),
            Some("GPU-10f35015-e921-bfab-2eb8-4e9b6664d5f1")
        );
        assert_eq!(gpu.compute_capability.as_deref(), Some("sm_90"));
        assert_eq!(gpu.driver_version.as_deref(), Some("545.23.08"));
        assert_eq!(gpu.cuda_version.as_deref(), Some("12.3"));
        assert_eq!(gpu.memory_total_mib, Some(81559));
        assert_eq!(gpu.mig_mode.as_deref(), Some("Disabled"));
        assert_eq!(gpu.ecc_mode.as_deref(), Some("Enabled"));
        assert_eq!(gpu.power_limit_w, Some(700.0));
        assert_eq!(gpu.applications_graphics_clock_mhz, Some(1980));
        assert_eq!(gpu.max_sm_clock_mhz, Some(1980));
    }

    #[test]
    fn l40s_table() {
        let gpus = found(parse_nvidia_smi_table(include_str!(
            "../../../fixtures/probes/l40s-thamada/nvidia-smi.txt"
        )));
        assert_eq!(gpus.len(), 1);
        let gpu = &gpus[0];
        assert_eq!(gpu.name, "NVIDIA L40S");
        assert_eq!(gpu.compute_capability.as_deref(), Some("sm_89"));
        assert_eq!(
            gpu.compute_capability_source,
            Some(ComputeCapabilitySource::ProductName)
        );
        assert_eq!(gpu.driver_version.as_deref(), Some("550.127.05"));
        assert_eq!(gpu.cuda_version.as_deref(), Some("12.4"));
        assert_eq!(gpu.memory_total_mib, Some(46068));
        assert_eq!(gpu.power_limit_w, Some(350.0));
        assert_eq!(gpu.mig_mode, None, "the table says N/A");
        assert_eq!(gpu.uuid, None, "the table prints no UUID");
    }

    #[test]
    fn rtx4090_table_agrees_with_q_text_of_the_same_host() {
        let table = found(parse_nvidia_smi_table(include_str!(
            "../../../fixtures/probes/rtx4090x8-thamada/nvidia-smi.txt"
        )));
        let q = found(parse_nvidia_smi_q_text(include_str!(
            "../../../fixtures/probes/rtx4090x8-thamada/nvidia-smi-q.txt"
        )));
        assert_eq!(table.len(), 8);
        assert_eq!(q.len(), 8);
        for (row, full) in table.iter().zip(&q) {
            assert_eq!(row.name, "NVIDIA GeForce RTX 4090");
            assert_eq!(row.name, full.name);
            assert_eq!(row.compute_capability.as_deref(), Some("sm_89"));
            assert_eq!(row.compute_capability, full.compute_capability);
            assert_eq!(row.memory_total_mib, Some(24564));
            assert_eq!(row.memory_total_mib, full.memory_total_mib);
            assert_eq!(row.power_limit_w, Some(450.0));
            assert_eq!(row.power_limit_w, full.power_limit_w);
            assert_eq!(row.driver_version.as_deref(), Some("550.127.05"));
            assert_eq!(row.driver_version, full.driver_version);
            assert_eq!(row.cuda_version, full.cuda_version);
        }
        assert_eq!(q[0].max_sm_clock_mhz, Some(3105));
    }

    #[test]
    fn b200_table_with_mig_disabled() {
        let gpus = found(parse_nvidia_smi_table(include_str!(
            "../../../fixtures/probes/b200x8-modal-glossary/nvidia-smi.txt"
        )));
        assert_eq!(gpus.len(), 8);
        for gpu in &gpus {
            assert_eq!(gpu.name, "NVIDIA B200");
            assert_eq!(gpu.compute_capability.as_deref(), Some("sm_100"));
            assert_eq!(gpu.driver_version.as_deref(), Some("575.57.08"));
            assert_eq!(gpu.cuda_version.as_deref(), Some("12.9"));
            assert_eq!(gpu.memory_total_mib, Some(183359));
            assert_eq!(gpu.power_limit_w, Some(1000.0));
            assert_eq!(gpu.mig_mode.as_deref(), Some("Disabled"));
        }
    }

    #[test]
    fn rtx5090_laptop_table_name_is_cut_short() {
        let gpus = found(parse_nvidia_smi_table(include_str!(
            "../../../fixtures/probes/rtx5090-laptop-gotree94/nvidia-smi.txt"
        )));
        assert_eq!(gpus.len(), 1, "the process rows are not GPUs");
        let gpu = &gpus[0];
        assert_eq!(gpu.name, "NVIDIA GeForce RTX 5090 ...");
        assert!(name_is_cut_short(&gpu.name));
        assert_eq!(gpu.compute_capability.as_deref(), Some("sm_120"));
        assert_eq!(gpu.driver_version.as_deref(), Some("580.65.06"));
        assert_eq!(gpu.cuda_version.as_deref(), Some("13.0"));
        assert_eq!(gpu.memory_total_mib, Some(24463));
        assert_eq!(gpu.power_limit_w, Some(95.0));
    }

    #[test]
    fn table_rows_of_the_older_layout() {
        // GPU row of a driver 470 table (mxochicale/code, gpu/nvidia/LOGS.md): the name is cut
        // to its brand, so no compute capability can be read from it.
        let row = "|   0  NVIDIA GeForce ...  Off  | 00000000:01:00.0  On |                  N/A |";
        let name = table_gpu_row(row).unwrap();
        assert_eq!(name, "NVIDIA GeForce ...");
        assert!(name_is_cut_short(&name));
        assert_eq!(capability_from_name(&name), None);
        // A process row is not a GPU row.
        let process =
            "|    0   N/A  N/A      1951      G   /usr/lib/xorg/Xorg                       64MiB |";
        assert_eq!(table_gpu_row(process), None);
    }

    #[test]
    fn rtx_pro_6000_blackwell_xml() {
        let gpus = found(parse_nvidia_smi_xml(include_str!(
            "../../../fixtures/probes/rtx-pro-6000-blackwell-maxq-telegraf/nvidia-smi-q-x.xml"
        )));
        assert_eq!(gpus.len(), 1);
        let gpu = &gpus[0];
        assert_eq!(
            gpu.name,
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"
        );
        assert_eq!(gpu.compute_capability.as_deref(), Some("sm_120"));
        assert_eq!(
            gpu.compute_capability_source,
            Some(ComputeCapabilitySource::ProductName)
        );
        assert_eq!(gpu.driver_version.as_deref(), Some("590.44.01"));
        assert_eq!(gpu.cuda_version.as_deref(), Some("13.1"));
        assert_eq!(gpu.memory_total_mib, Some(97887));
        assert_eq!(gpu.power_limit_w, Some(300.0));
        assert_eq!(gpu.max_sm_clock_mhz, Some(3090));
        assert_eq!(
            gpu.applications_graphics_clock_mhz, None,
            "driver 590 says the field is deprecated"
        );
        assert_eq!(gpu.mig_mode, None);
        assert_eq!(gpu.ecc_mode.as_deref(), Some("Disabled"));
    }

    #[test]
    fn workstation_names_do_not_take_a_geforce_series_capability() {
        for (name, sm) in [
            ("NVIDIA GeForce RTX 5090", Some("sm_120")),
            ("NVIDIA GeForce RTX 5080", Some("sm_120")),
            ("NVIDIA GeForce RTX 5090 Laptop GPU", Some("sm_120")),
            ("NVIDIA GeForce RTX 4080", Some("sm_89")),
            ("NVIDIA B200", Some("sm_100")),
            ("NVIDIA GB200", Some("sm_100")),
            ("NVIDIA B300", Some("sm_103")),
            ("NVIDIA GB300", Some("sm_103")),
            ("NVIDIA RTX 5000 Ada Generation", Some("sm_89")),
            ("Quadro RTX 4000", Some("sm_75")),
            ("Quadro RTX 5000", Some("sm_75")),
        ] {
            assert_eq!(capability_from_name(name), sm, "{name}");
        }
    }

    #[test]
    fn recorded_ada_and_blackwell_sets_give_their_cuda_generations() {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/probes"));
        for (host, key, count) in [
            ("l40s-thamada", "cuda/sm_89", 1),
            ("rtx4090x8-thamada", "cuda/sm_89", 8),
            ("b200x8-modal-glossary", "cuda/sm_100", 8),
            ("rtx5090-laptop-gotree94", "cuda/sm_120", 1),
            ("rtx-pro-6000-blackwell-maxq-telegraf", "cuda/sm_120", 1),
        ] {
            let inventory = crate::probe::HardwareInventory::from_dir(&dir.join(host));
            let gpus = inventory.nvidia.found().unwrap_or_else(|| panic!("{host}"));
            assert_eq!(gpus.len(), count, "{host}");
            let keys: Vec<String> = crate::generations::of(&inventory, true)
                .into_iter()
                .map(|g| g.key)
                .collect();
            assert_eq!(keys, [key], "{host}");
        }
        // With both files recorded, `-q` text wins over the table: it has the UUIDs.
        let both = crate::probe::HardwareInventory::from_dir(&dir.join("rtx4090x8-thamada"));
        assert!(both.nvidia.found().unwrap()[0].uuid.is_some());
    }

    #[test]
    fn empty_output_is_absent() {
        assert!(parse_nvidia_smi_xml("").is_absent());
        assert!(parse_nvidia_smi_csv("").is_absent());
        assert!(parse_nvidia_smi_q_text("").is_absent());
        assert!(parse_nvidia_smi_table("").is_absent());
    }
}

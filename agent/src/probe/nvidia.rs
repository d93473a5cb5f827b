//! Parses `nvidia-smi -q -x` XML, `nvidia-smi -q` text and `nvidia-smi --query-gpu=... --format=csv`
//! into one [`NvidiaGpu`] per board.

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
/// (https://developer.nvidia.com/cuda-gpus). Checked in order; the first fragment found wins.
#[rustfmt::skip]
const CAPABILITY_BY_NAME: &[(&str, &str)] = &[
    ("GB200", "sm_100"), ("B200", "sm_100"), ("B100", "sm_100"),
    ("GH200", "sm_90"), ("H200", "sm_90"), ("H100", "sm_90"), ("H800", "sm_90"),
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
    fn empty_output_is_absent() {
        assert!(parse_nvidia_smi_xml("").is_absent());
        assert!(parse_nvidia_smi_csv("").is_absent());
        assert!(parse_nvidia_smi_q_text("").is_absent());
    }
}

//! Vulkan devices from `vulkaninfo --summary`: each `GPUn:` block of its `Devices:` section
//! (`deviceType`, `deviceName`, `vendorID`, `driverName`, `driverInfo`, `apiVersion`). A CPU
//! driver (Mesa's lavapipe, `PHYSICAL_DEVICE_TYPE_CPU`) is a device like any other, and its
//! generation key says what it is: `vulkan/cpu/llvmpipe`.

use serde::{Deserialize, Serialize};

use super::outcome::Probe;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VulkanDevice {
    /// `cpu`, `discrete`, `integrated`, `virtual` or `other` (from `deviceType`).
    pub kind: String,
    /// `llvmpipe (LLVM 15.0.6, 256 bits)`, `NVIDIA GeForce RTX 4090`.
    pub name: String,
    /// `0x10de` (NVIDIA), `0x1002` (AMD), `0x8086` (Intel), `0x10005` (Mesa's CPU drivers).
    pub vendor_id: String,
    /// `llvmpipe`, `NVIDIA`, `radv`, `Intel open-source Mesa driver`.
    pub driver_name: String,
    /// `Mesa 22.3.6 (LLVM 15.0.6)`, `550.54.14`.
    pub driver_info: String,
    pub api_version: String,
}

impl VulkanDevice {
    /// The vendor as a fleet names it.
    pub fn vendor(&self) -> &'static str {
        match self.vendor_id.to_ascii_lowercase().as_str() {
            "0x10de" => "nvidia",
            "0x1002" => "amd",
            "0x8086" => "intel",
            "0x13b5" => "arm",
            "0x5143" => "qualcomm",
            "0x10005" => "mesa",
            _ => "other",
        }
    }
}

/// The devices of a `vulkaninfo --summary` output; absent with the reason when it lists none.
pub fn parse_vulkaninfo_summary(text: &str) -> Probe<Vec<VulkanDevice>> {
    let Some(devices) = text.split_once("\nDevices:").map(|(_, rest)| rest) else {
        return Probe::absent("vulkaninfo printed no Devices section");
    };
    let mut found = Vec::new();
    let mut current: Option<Vec<(String, String)>> = None;
    let finish = |fields: Vec<(String, String)>, found: &mut Vec<VulkanDevice>| {
        let get = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k == name)
                .map_or(String::new(), |(_, v)| v.clone())
        };
        let kind = match get("deviceType").as_str() {
            "PHYSICAL_DEVICE_TYPE_CPU" => "cpu",
            "PHYSICAL_DEVICE_TYPE_DISCRETE_GPU" => "discrete",
            "PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU" => "integrated",
            "PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU" => "virtual",
            _ => "other",
        };
        let name = get("deviceName");
        if !name.is_empty() {
            found.push(VulkanDevice {
                kind: kind.to_string(),
                name,
                vendor_id: get("vendorID"),
                driver_name: get("driverName"),
                driver_info: get("driverInfo"),
                api_version: get("apiVersion"),
            });
        }
    };
    for line in devices.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("GPU") && trimmed.ends_with(':') {
            if let Some(fields) = current.take() {
                finish(fields, &mut found);
            }
            current = Some(Vec::new());
        } else if let (Some(fields), Some((key, value))) =
            (current.as_mut(), trimmed.split_once('='))
        {
            fields.push((key.trim().to_string(), value.trim().to_string()));
        }
    }
    if let Some(fields) = current.take() {
        finish(fields, &mut found);
    }
    if found.is_empty() {
        Probe::absent("vulkaninfo listed no device")
    } else {
        Probe::Found(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lavapipe_is_a_cpu_device_of_mesa() {
        let text =
            include_str!("../../../fixtures/probes/lavapipe-mesa-22.3.6/vulkaninfo-summary.txt");
        let Probe::Found(devices) = parse_vulkaninfo_summary(text) else {
            panic!("no device in the lavapipe capture");
        };
        assert_eq!(devices.len(), 1);
        let device = &devices[0];
        assert_eq!(device.kind, "cpu");
        assert_eq!(device.name, "llvmpipe (LLVM 15.0.6, 256 bits)");
        assert_eq!(device.driver_name, "llvmpipe");
        assert_eq!(device.driver_info, "Mesa 22.3.6 (LLVM 15.0.6)");
        assert_eq!(device.vendor(), "mesa");
    }

    #[test]
    fn no_devices_is_absent_with_why() {
        assert!(parse_vulkaninfo_summary("VULKANINFO\n").found().is_none());
        assert!(parse_vulkaninfo_summary("x\nDevices:\n========\n")
            .found()
            .is_none());
    }
}

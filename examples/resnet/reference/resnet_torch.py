"""examples/resnet's network in PyTorch: ResNet-18 in its CIFAR form (3x3 stride-1 stem, no max pooling), with
torchvision's module names (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, ..., fc) and initialisation, so
that a minidl checkpoint loads with load_state_dict(strict=True); and the training step and optimizer of its
Trainer (SGD with Nesterov momentum 0.9 and weight decay 5e-4 on every parameter, OneCycleLR without momentum
cycling, cross entropy).
"""
import torch
import torch.nn.functional as F
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, in_channels, channels, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = None
        if stride != 1 or in_channels != channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride, bias=False),
                                            nn.BatchNorm2d(channels))

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    def __init__(self, width=64, blocks=(2, 2, 2, 2), classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        channels = width
        stages = []
        for i, (n, stride) in enumerate(zip(blocks, (1, 2, 2, 2))):
            out = width * 2 ** i
            stages.append(nn.Sequential(*[BasicBlock(channels if b == 0 else out, out, stride if b == 0 else 1)
                                          for b in range(n)]))
            channels = out
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8 * width, classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
        return self.fc(torch.flatten(self.avgpool(h), 1))


def config_from_metadata(meta):
    """ResNet's keyword arguments from a minidl checkpoint's metadata (resnet.width, resnet.blocks, resnet.classes)."""
    return {"width": int(meta["resnet.width"]), "blocks": tuple(int(b) for b in meta["resnet.blocks"].split(",")),
            "classes": int(meta["resnet.classes"])}


def make_optimizer(model, lr, momentum=0.9, weight_decay=5e-4):
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, nesterov=True, weight_decay=weight_decay)


def make_scheduler(optimizer, max_lr, total_steps):
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr, total_steps=total_steps, pct_start=0.3,
                                               anneal_strategy="cos", cycle_momentum=False)


def train_step(model, optimizer, x, y):
    """One step as minidl's Trainer::step: gradients zeroed, forward, cross entropy, backward, SGD's update.
    Returns (logits, loss), detached."""
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    return logits.detach(), loss.detach()
